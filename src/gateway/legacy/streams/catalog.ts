import type { Brand } from '../../../brand';
import { costMicrocents } from '../../../lib/wire';
import { cacheInfo } from '../../../upstream/client';
import type { ChatCompletionResponse, UpstreamClient, ModelList, ModelPricing } from '../../../upstream/client';
import { ServiceError } from '../../../lib/errors';
import { keyHash } from '../../../lib/keys';
import type { Logger } from '../../../lib/logger';
import { realClock } from '../../../lib/timers';
import type { Clock } from '../../../lib/timers';
import type { LRUCache } from 'lru-cache';
import { expiring } from '../../../lib/expiring-cache';
import { UPSTREAM_CONTEXTS, toLegacyError } from '../contract/upstream-errors';
import { LEGACY_ERRORS } from '../contract/errors';

/**
 * What the adapter knows about keys, models and prices, cached briefly so a legacy request costs as
 * few upstream calls as possible. Nothing here holds a raw key: caches are keyed by its hash.
 */
export class UpstreamCatalog {
  private models: { list: ModelList; atMs: number } | undefined;
  private modelsInFlight: Promise<ModelList> | undefined;
  private readonly prices = new Map<string, Promise<ModelPricing | undefined>>();
  private readonly accounts = new Map<string, { accountId: string; atMs: number }>();
  /** Recent outcomes per model (true = answered), for the legacy degraded/saturated statuses. */
  private readonly outcomes = new Map<string, boolean[]>();

  private readonly refusedKeys: NegativeKeyCache;
  private readonly clock: Pick<Clock, 'now'>;

  constructor(
    private readonly upstream: UpstreamClient,
    private readonly opts: {
      modelsCacheMs: number;
      accountCacheMs: number;
      negativeKeyCacheMs?: number;
      negativeKeyCacheSize?: number;
      logger?: Logger;
      /** Time of the cache entries (default the real clock). */
      clock?: Pick<Clock, 'now'>;
    },
  ) {
    this.clock = opts.clock ?? realClock;
    this.refusedKeys = new NegativeKeyCache(opts.negativeKeyCacheMs ?? 0, opts.negativeKeyCacheSize ?? 10_000, opts.clock);
  }

  /** The model list, or the legacy 502/503/504 its upstream failure maps to. */
  async modelList(): Promise<ModelList> {
    return this.rawModelList().catch((err: unknown) => {
      throw toLegacyError(err, UPSTREAM_CONTEXTS.models, this.opts.logger);
    });
  }

  private async rawModelList(): Promise<ModelList> {
    const now = this.clock.now();
    if (this.models && now - this.models.atMs < this.opts.modelsCacheMs) return this.models.list;
    // One upstream call however many requests arrive at once.
    this.modelsInFlight ??= this.upstream
      .listModels()
      .then((list) => {
        this.models = { list, atMs: this.clock.now() };
        return list;
      })
      .finally(() => {
        this.modelsInFlight = undefined;
      });
    return this.modelsInFlight;
  }

  async modelStatus(id: string): Promise<string | undefined> {
    const list = await this.modelList();
    return list.data.find((m) => m.id === id)?.status;
  }

  /** Every model the upstream lists, in its order (the default fallback list). */
  async modelIds(): Promise<string[]> {
    return (await this.modelList()).data.map((m) => m.id);
  }

  async isReady(id: string): Promise<boolean> {
    return (await this.modelStatus(id)) === 'ready';
  }

  /**
   * 422 for an unknown model, 503 for a known one that is not ready, and 503 for one this gateway
   * sees `saturated` (what /v0.2/models shows): the contract's "at capacity, rejects new streams".
   * `loc` places the 422 in the request (default: a create's `inference.model`).
   */
  async requireReadyModel(id: string, loc?: readonly string[]): Promise<void> {
    const status = await this.modelStatus(id);
    if (status === undefined) throw LEGACY_ERRORS.unknownModel(id, loc);
    if (status !== 'ready') throw LEGACY_ERRORS.modelUnavailable(id, status);
    if (this.observed().get(id) === 'saturated') {
      throw LEGACY_ERRORS.modelSaturated(id);
    }
  }

  pricing(model: string): Promise<ModelPricing | undefined> {
    let p = this.prices.get(model);
    if (!p) {
      p = this.upstream.pricing(model).catch(() => {
        this.prices.delete(model); // retry next time
        return undefined;
      });
      this.prices.set(model, p);
    }
    return p;
  }

  /** What a completion cost on the model's price (cached input tokens at their own rate); 0 when unpriced. */
  async completionCost(model: string, response: ChatCompletionResponse, brand: Brand): Promise<number> {
    const price = response.usage ? await this.pricing(model) : undefined;
    if (!price || !response.usage) return 0;
    return costMicrocents(price, response.usage, cacheInfo(response, brand)?.cached_input_tokens ?? 0);
  }

  /**
   * The upstream account of a key (its balance's `user_id`): 401 when the upstream refuses the key
   * (remembered briefly, so a bad key does not cost an upstream call each time); the legacy
   * 502/503/504 when the upstream cannot tell. Cached so WebSocket auth and keepalives do not each
   * cost a call.
   */
  async accountOf(apiKey: string, ids: { requestId?: string; traceId?: string } = {}): Promise<string> {
    // A key that cannot travel in a header (or is absurdly long) is no key: refused without a call.
    if (!KEY_SHAPE.test(apiKey)) throw unauthorized();
    const h = keyHash(apiKey);
    if (this.refusedKeys.has(h)) throw unauthorized();
    const hit = this.accounts.get(h);
    if (hit && this.clock.now() - hit.atMs < this.opts.accountCacheMs) return hit.accountId;
    try {
      const b = await this.upstream.balance(apiKey, ids);
      this.accounts.set(h, { accountId: b.user_id, atMs: this.clock.now() });
      return b.user_id;
    } catch (err) {
      const mapped = toLegacyError(err, UPSTREAM_CONTEXTS.authenticate, this.opts.logger);
      if (mapped instanceof ServiceError && (mapped.status === 401 || mapped.status === 403)) {
        this.accounts.delete(h);
        this.refusedKeys.add(h);
        throw unauthorized();
      }
      throw mapped;
    }
  }

  recordOutcome(model: string, answered: boolean): void {
    const list = this.outcomes.get(model) ?? [];
    list.push(answered);
    if (list.length > 50) list.shift();
    this.outcomes.set(model, list);
  }

  /** Ready models the gateway saw failing: ≥ 20 % of recent calls → degraded, ≥ 80 % → saturated. */
  observed(): Map<string, 'degraded' | 'saturated'> {
    const out = new Map<string, 'degraded' | 'saturated'>();
    for (const [model, list] of this.outcomes) {
      if (list.length < 5) continue;
      const failed = list.filter((ok) => !ok).length / list.length;
      if (failed >= 0.8) out.set(model, 'saturated');
      else if (failed >= 0.2) out.set(model, 'degraded');
    }
    return out;
  }
}

const KEY_SHAPE = /^[\x21-\x7e]{1,1024}$/;

function unauthorized(): ServiceError {
  return LEGACY_ERRORS.unauthorized();
}

/** Key hashes the upstream refused (401/403), remembered for `ttlMs` (0: not at all). */
export class NegativeKeyCache {
  private readonly refused: LRUCache<string, true> | undefined;

  constructor(ttlMs: number, maxSize: number, clock?: Pick<Clock, 'now'>) {
    this.refused = ttlMs > 0 ? expiring(maxSize, ttlMs, clock) : undefined;
  }

  has(keyHash: string): boolean {
    return this.refused?.get(keyHash) === true;
  }

  add(keyHash: string): void {
    this.refused?.set(keyHash, true);
  }

  get size(): number {
    return this.refused?.size ?? 0;
  }
}

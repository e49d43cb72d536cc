/**
 * Who still uses /v0.2, with what: per-key counters kept in the store (so they survive what the
 * store survives and are shared by replicas), and the report built from them. Keys appear only as
 * their hash; account ids (not secrets) let an operator find the customer.
 *
 * Store layout (all hashes of numbers):
 *   depr:key:<keyHash>   first_seen_ms, last_seen_ms, req:<endpoint>, streams, source:<s>, mode:<m>,
 *                        field:<f>, backend:<b>, model:<m>, inferences:ok|failed, output_tokens,
 *                        ws_connections, end:<reason>
 *   depr:acct:<keyHash>  <accountId> → last seen ms
 *   depr:day:<YYYY-MM-DD> (UTC) requests, streams, inferences, output_tokens, ws_connections, key:<keyHash>
 */
import type { Logger } from '../../lib/logger';
import type { Store } from '../store/store';

const KEY = 'depr:key:';
const ACCT = 'depr:acct:';
const DAY = 'depr:day:';

/** What a created stream contributes (a SessionSpec fits). */
export interface StreamTraits {
  transport: string;
  mode: string;
  backend: string;
  model: string;
  deprecatedFields: readonly string[];
}

export interface KeyUsage {
  key_hash: string;
  account_ids: string[];
  first_seen_at: string | null;
  last_seen_at: string | null;
  requests_total: number;
  /** By endpoint, e.g. `POST /v0.2/streams`, `WS /v0.2/ws/streams/:id`. */
  requests: Record<string, number>;
  streams: { total: number; by_source: Record<string, number>; by_mode: Record<string, number> };
  deprecated_fields: Record<string, number>;
  backends: Record<string, number>;
  models: Record<string, number>;
  inferences: { ok: number; failed: number };
  output_tokens: number;
  websocket_connections: number;
  end_reasons: Record<string, number>;
}

export interface DayUsage {
  date: string;
  active_keys: number;
  requests: number;
  streams: number;
  inferences: number;
  output_tokens: number;
  websocket_connections: number;
}

export interface DeprecationReport {
  generated_at: string;
  deprecation: { date: string; sunset: string; link: string };
  totals: {
    keys: number;
    requests: number;
    streams: number;
    inferences: number;
    output_tokens: number;
    websocket_connections: number;
  };
  /** Per UTC day, newest first. */
  daily: DayUsage[];
  /** Most recently seen first. */
  keys: KeyUsage[];
}

export const utcDay = (ms: number): string => new Date(ms).toISOString().slice(0, 10);

export class DeprecationUsage {
  private readonly pending = new Set<Promise<void>>();

  constructor(
    private readonly store: Store,
    private readonly logger: Logger,
    private readonly now: () => number = Date.now,
  ) {}

  /** One authenticated legacy request (or results-socket connection) by endpoint. */
  request(keyHash: string, endpoint: string, accountId?: string): void {
    const t = this.now();
    const k = KEY + keyHash;
    const d = DAY + utcDay(t);
    this.write(
      this.store.hsetMin(k, 'first_seen_ms', t),
      this.store.hsetMax(k, 'last_seen_ms', t),
      this.store.hincr(k, `req:${endpoint}`),
      this.store.hincr(d, 'requests'),
      this.store.hincr(d, `key:${keyHash}`),
      accountId ? this.store.hsetMax(ACCT + keyHash, accountId, t) : undefined,
    );
  }

  streamCreated(keyHash: string, s: StreamTraits): void {
    const k = KEY + keyHash;
    this.write(
      this.store.hincr(k, 'streams'),
      this.store.hincr(k, `source:${s.transport}`),
      this.store.hincr(k, `mode:${s.mode}`),
      this.store.hincr(k, `backend:${s.backend}`),
      this.store.hincr(k, `model:${s.model}`),
      ...s.deprecatedFields.map((f) => this.store.hincr(k, `field:${f}`)),
      this.store.hincr(DAY + utcDay(this.now()), 'streams'),
    );
  }

  streamEnded(keyHash: string, reason: string): void {
    this.write(this.store.hincr(KEY + keyHash, `end:${reason}`));
  }

  inference(keyHash: string, ok: boolean, outputTokens: number): void {
    const k = KEY + keyHash;
    const d = DAY + utcDay(this.now());
    this.write(
      this.store.hincr(k, ok ? 'inferences:ok' : 'inferences:failed'),
      this.store.hincr(d, 'inferences'),
      outputTokens > 0 ? this.store.hincr(k, 'output_tokens', outputTokens) : undefined,
      outputTokens > 0 ? this.store.hincr(d, 'output_tokens', outputTokens) : undefined,
    );
  }

  socketOpened(keyHash: string): void {
    this.write(this.store.hincr(KEY + keyHash, 'ws_connections'), this.store.hincr(DAY + utcDay(this.now()), 'ws_connections'));
  }

  /** Resolves once every counter write issued so far has landed (shutdown, tests). */
  async flush(): Promise<void> {
    while (this.pending.size) await Promise.all([...this.pending]);
  }

  async keyCount(): Promise<number> {
    return (await this.store.keys(KEY)).length;
  }

  async report(deprecation: DeprecationReport['deprecation'], opts: { days?: number } = {}): Promise<DeprecationReport> {
    const keyHashes = (await this.store.keys(KEY)).map((k) => k.slice(KEY.length));
    const keys = await Promise.all(keyHashes.map((h) => this.keyUsage(h)));
    keys.sort((a, b) => (b.last_seen_at ?? '').localeCompare(a.last_seen_at ?? '') || a.key_hash.localeCompare(b.key_hash));
    const dayKeys = (await this.store.keys(DAY)).sort().reverse().slice(0, opts.days ?? 31);
    const daily = await Promise.all(dayKeys.map((k) => this.dayUsage(k.slice(DAY.length))));
    const sum = (f: (k: KeyUsage) => number) => keys.reduce((n, k) => n + f(k), 0);
    return {
      generated_at: new Date(this.now()).toISOString(),
      deprecation,
      totals: {
        keys: keys.length,
        requests: sum((k) => k.requests_total),
        streams: sum((k) => k.streams.total),
        inferences: sum((k) => k.inferences.ok + k.inferences.failed),
        output_tokens: sum((k) => k.output_tokens),
        websocket_connections: sum((k) => k.websocket_connections),
      },
      daily,
      keys,
    };
  }

  async dayUsage(date: string): Promise<DayUsage> {
    const h = await this.store.hgetall(DAY + date);
    return {
      date,
      active_keys: Object.keys(h).filter((f) => f.startsWith('key:')).length,
      requests: h.requests ?? 0,
      streams: h.streams ?? 0,
      inferences: h.inferences ?? 0,
      output_tokens: h.output_tokens ?? 0,
      websocket_connections: h.ws_connections ?? 0,
    };
  }

  private async keyUsage(keyHash: string): Promise<KeyUsage> {
    const [h, accounts] = await Promise.all([this.store.hgetall(KEY + keyHash), this.store.hgetall(ACCT + keyHash)]);
    const group = (prefix: string): Record<string, number> => {
      const out: Record<string, number> = {};
      for (const [field, n] of Object.entries(h)) if (field.startsWith(prefix)) out[field.slice(prefix.length)] = n;
      return out;
    };
    const iso = (ms: number | undefined) => (ms === undefined ? null : new Date(ms).toISOString());
    const requests = group('req:');
    return {
      key_hash: keyHash,
      account_ids: Object.entries(accounts)
        .sort((a, b) => b[1] - a[1])
        .map(([id]) => id),
      first_seen_at: iso(h.first_seen_ms),
      last_seen_at: iso(h.last_seen_ms),
      requests_total: Object.values(requests).reduce((a, b) => a + b, 0),
      requests,
      streams: { total: h.streams ?? 0, by_source: group('source:'), by_mode: group('mode:') },
      deprecated_fields: group('field:'),
      backends: group('backend:'),
      models: group('model:'),
      inferences: { ok: h['inferences:ok'] ?? 0, failed: h['inferences:failed'] ?? 0 },
      output_tokens: h.output_tokens ?? 0,
      websocket_connections: h.ws_connections ?? 0,
      end_reasons: group('end:'),
    };
  }

  /** Counter writes never fail the request or tick that caused them: they are logged. */
  private write(...ops: (Promise<void> | undefined)[]): void {
    const p = Promise.all(ops)
      .then(() => undefined)
      .catch((err: unknown) => this.logger.warn({ err }, 'deprecation counter write failed'))
      .finally(() => this.pending.delete(p));
    this.pending.add(p);
  }
}

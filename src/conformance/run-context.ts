/**
 * What every group of checks shares: the gateway's own upstream client and the key, the verdicts
 * so far, what earlier checks learned (the model, its pricing, the stream), and the calls that
 * count toward the kit's bounds (completions, money spent).
 */
import type { Brand } from '../brand';
import { isRecord } from '../lib/is-record';
import { costMicrocents } from '../lib/wire';
import { UpstreamClient, cacheInfo } from '../upstream/client';
import type { ChatCompletionRequest, ChatCompletionResponse, ContentPart, CreateStreamResponse, ModelPricing } from '../upstream/client';
import type { CheckId } from './checks';
import { MAX_COMPLETIONS, OUTPUT_CAP } from './cost';
import type { CostEstimate } from './cost';
import type { TestPattern } from './publish';
import type { CheckResult, ConformanceOptions, Outcome } from './run';
import { errorText } from './verdicts';
import type { Finding } from './verdicts';

export const PROMPT = 'Describe what you see in one short sentence.';

/** Thrown by `checkAborted` once the caller's signal aborts: the run stops and reports the rest as skipped. */
export class Interrupted extends Error {
  override name = 'Interrupted';
}

export class RunContext {
  readonly client: UpstreamClient;
  readonly brand: Brand;
  readonly key: string;
  readonly skip: Set<CheckId>;
  readonly results = new Map<CheckId, CheckResult>();
  readonly progress: (line: string) => void;
  readonly signal: AbortSignal | undefined;
  /** Toward the kit's bound (`MAX_COMPLETIONS`) and the money it reports. */
  completions = 0;
  spent = 0;
  // What earlier checks learned, for the later ones and the report.
  model: string | undefined;
  price: ModelPricing | undefined;
  estimate: CostEstimate | undefined;
  streamId: string | undefined;
  created: CreateStreamResponse | undefined;
  deleted = false;
  publisher: TestPattern | undefined;
  balanceBefore: number | undefined;
  balanceAfter: number | undefined;

  constructor(readonly opts: ConformanceOptions) {
    this.brand = opts.brand;
    this.key = opts.apiKey;
    this.skip = new Set(opts.skip ?? []);
    this.progress = opts.onProgress ?? (() => {});
    this.signal = opts.signal;
    // The gateway's retry policies, except that no completion is retried: each one the kit sends counts toward its bound.
    this.client = new UpstreamClient({
      baseUrl: opts.upstreamUrl,
      brand: opts.brand,
      timeouts: opts.timeouts,
      logger: opts.logger,
      connections: 4,
      retry: { delaysMs: { completion: [] } },
    });
  }

  // ── recording ──

  record(id: CheckId, outcome: Outcome, detail: string): void {
    if (!this.results.has(id)) this.results.set(id, { id, outcome, detail });
  }

  /** The verdict of a check from its problems (a requested skip wins). */
  verdict(id: CheckId, problems: string[], passDetail = ''): boolean {
    if (this.skip.has(id)) this.record(id, 'skip', 'skipped on request');
    else if (problems.length > 0) this.record(id, 'fail', problems.join('; '));
    else this.record(id, 'pass', passDetail);
    return problems.length === 0;
  }

  /** Runs a check that nothing else depends on (not at all when skipped); a throw is its failure. */
  async check(id: CheckId, body: () => Promise<string[] | Finding>): Promise<void> {
    this.checkAborted();
    if (this.skip.has(id)) return this.record(id, 'skip', 'skipped on request');
    try {
      const out = await body();
      const { problems, detail, skip } = Array.isArray(out) ? { problems: out, detail: '', skip: undefined } : out;
      if (skip !== undefined) this.record(id, 'skip', skip);
      else this.verdict(id, problems, detail);
    } catch (err) {
      this.checkAborted();
      this.record(id, 'fail', errorText(err));
    }
  }

  skipAll(ids: CheckId[], why: string): void {
    for (const id of ids) this.record(id, 'skip', why);
  }

  checkAborted(): void {
    if (this.signal?.aborted) throw new Interrupted('interrupted');
  }

  get call() {
    return { signal: this.signal };
  }

  // ── calls ──

  imageRequest(id: string, query: string): ChatCompletionRequest {
    const image: ContentPart = { type: 'image_url', image_url: { url: `${this.brand.scheme}://streams/${id}?${query}` } };
    return {
      model: this.model!,
      messages: [{ role: 'user', content: [{ type: 'text', text: PROMPT }, image] }],
      max_completion_tokens: OUTPUT_CAP,
      stream: false,
    };
  }

  count(): void {
    if (this.completions >= MAX_COMPLETIONS) throw new Error(`the kit's bound of ${MAX_COMPLETIONS} completions is reached`);
    this.completions++;
  }

  /** One completion through the gateway's client, with no fallback model (the kit asks one model). */
  async complete(req: ChatCompletionRequest): Promise<ChatCompletionResponse> {
    this.count();
    const { response } = await this.client.chatCompletion(this.key, req, { ...this.call, fallbackModels: [] });
    return response;
  }

  charge(r: ChatCompletionResponse): number {
    if (!this.price || !isRecord(r.usage) || typeof r.usage.prompt_tokens !== 'number' || typeof r.usage.completion_tokens !== 'number')
      return 0;
    const cost = costMicrocents(this.price, r.usage, cacheInfo(r, this.brand)?.cached_input_tokens ?? 0);
    this.spent += cost;
    return cost;
  }

  /** An HTTP exchange the client has no method for (SSE, response headers, the viewer token). */
  async raw(method: string, path: string, body?: unknown): Promise<{ status: number; headers: Headers; text: string }> {
    const base = this.opts.upstreamUrl.replace(/\/+$/, '');
    const res = await fetch(`${base}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${this.key}`,
        accept: 'application/json, text/event-stream',
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: this.signal ? AbortSignal.any([this.signal, AbortSignal.timeout(60_000)]) : AbortSignal.timeout(60_000),
    });
    return { status: res.status, headers: res.headers, text: await res.text() };
  }

  async stopPublisher(): Promise<void> {
    const p = this.publisher;
    this.publisher = undefined;
    await p?.stop().catch(() => undefined);
  }
}

/**
 * The conformance run: every behaviour of a /v1beta + /billing upstream the gateway relies on,
 * checked through the gateway's own `UpstreamClient` (raw HTTP only where it has no method: SSE,
 * response headers, the viewer token). It creates at most one stream and deletes it on every path,
 * the caller's abort (Ctrl-C) included, and issues at most `MAX_COMPLETIONS` completions.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import type { Brand } from '../brand';
import { isRecord } from '../lib/is-record';
import { createLogger } from '../lib/logger';
import type { Logger } from '../lib/logger';
import { costMicrocents } from '../lib/wire';
import { UpstreamClient, UpstreamError, cacheInfo } from '../upstream/client';
import type {
  ChatCompletionRequest,
  ChatCompletionResponse,
  ContentPart,
  CreateStreamResponse,
  ModelPricing,
  Stream,
  UpstreamTimeouts,
} from '../upstream/client';
import { describeBody, httpError } from '../upstream/errors';
import { sleep } from '../upstream/retry';
import { CHECK_IDS } from './checks';
import type { CheckId } from './checks';
import { publishTestPattern } from './publish';
import type { TestPattern } from './publish';
import { CLIP_FPS, CLIP_MS, MAX_COMPLETIONS, OUTPUT_CAP, estimateCost, costLine, formatCents } from './cost';
import type { CostEstimate } from './cost';
import { UUID_RE, describe, problem, shapeProblems } from './shapes';
import { checkSse } from './sse';
import { whipVerdict } from './whip';
import {
  completionProblems,
  createProblems,
  errorText,
  expectStreamError,
  parseLenient,
  readProblems,
  readingOf,
  repeatedKeyVerdict,
} from './verdicts';
import type { Finding } from './verdicts';

const REGIONS = ['us-west1', 'us-central1'] as const;
/** The gateway's first-frame poll interval (`legacy.firstFramePollMs` default). */
const POLL_MS = 250;
const PROMPT = 'Describe what you see in one short sentence.';

export type PublishMode = 'auto' | 'always' | 'never';

/** The checks that need the stream's frames (skipped together when none came). */
const FRAME_CHECKS: CheckId[] = [
  'completion.clip',
  'completion.frame',
  'prompt-cache',
  'completion.sse',
  'reference.future-frame',
  'reference.repeated-key',
];

export interface ConformanceOptions {
  upstreamUrl: string;
  apiKey: string;
  brand: Brand;
  /** The model to ask; default the first `ready` one the upstream lists. */
  model?: string;
  /**
   * How first frames reach the stream: `never` waits for the upstream's own publisher (the
   * emulator's synthetic one); `always` publishes a test pattern at once; `auto` publishes one when
   * no frame has arrived after `autoPublishAfterMs`.
   */
  publish?: PublishMode;
  /** How long to wait for the first frames (and a full clip) before giving up. Default 30 s. */
  frameTimeoutMs?: number;
  /** `auto`: how long to wait for the upstream's own frames. Default 5 s. */
  autoPublishAfterMs?: number;
  /** Checks not run (reported as skipped). */
  skip?: readonly CheckId[];
  /** Aborting stops the run: the stream is deleted, the rest reported as skipped. */
  signal?: AbortSignal;
  logger?: Logger;
  /** One line per step (stream created, waiting for frames, …). */
  onProgress?: (line: string) => void;
  timeouts?: Partial<UpstreamTimeouts>;
}

export type Outcome = 'pass' | 'fail' | 'skip';

export interface CheckResult {
  id: CheckId;
  outcome: Outcome;
  detail: string;
}

export interface ConformanceReport {
  upstreamUrl: string;
  model: string | undefined;
  results: CheckResult[];
  /** No check failed and the run was not interrupted. */
  ok: boolean;
  interrupted: boolean;
  streamId: string | undefined;
  /** Whether the stream is gone (undefined: none was created). */
  streamDeleted: boolean | undefined;
  completions: number;
  estimate: CostEstimate | undefined;
  /** Cost of the completions the upstream answered, on the model's pricing. */
  spentMicrocents: number;
  balanceBeforeMicrocents: number | undefined;
  balanceAfterMicrocents: number | undefined;
}

class Interrupted extends Error {
  override name = 'Interrupted';
}

/** Runs every check against the upstream; never throws for an upstream's behaviour. */
export async function runConformance(opts: ConformanceOptions): Promise<ConformanceReport> {
  return new Run(opts).run();
}

class Run {
  private readonly client: UpstreamClient;
  private readonly brand: Brand;
  private readonly key: string;
  private readonly skip: Set<CheckId>;
  private readonly results = new Map<CheckId, CheckResult>();
  private readonly progress: (line: string) => void;
  private readonly signal: AbortSignal | undefined;
  private completions = 0;
  private spent = 0;
  private model: string | undefined;
  private price: ModelPricing | undefined;
  private estimate: CostEstimate | undefined;
  private streamId: string | undefined;
  private created: CreateStreamResponse | undefined;
  private deleted = false;
  private publisher: TestPattern | undefined;
  private balanceBefore: number | undefined;
  private balanceAfter: number | undefined;

  constructor(private readonly opts: ConformanceOptions) {
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

  async run(): Promise<ConformanceReport> {
    let interrupted = false;
    try {
      await this.keyless();
      await this.keyed();
      await this.withStream();
    } catch (err) {
      if (!(err instanceof Interrupted) && !this.signal?.aborted) throw err;
      interrupted = true;
    } finally {
      await this.cleanUp();
    }
    for (const id of CHECK_IDS) if (!this.results.has(id)) this.record(id, 'skip', interrupted ? 'interrupted' : 'not reached');
    const results = CHECK_IDS.map((id) => this.results.get(id)!);
    return {
      upstreamUrl: this.opts.upstreamUrl,
      model: this.model,
      results,
      ok: !interrupted && results.every((r) => r.outcome !== 'fail'),
      interrupted,
      streamId: this.streamId,
      streamDeleted: this.streamId === undefined ? undefined : this.deleted,
      completions: this.completions,
      estimate: this.estimate,
      spentMicrocents: this.spent,
      balanceBeforeMicrocents: this.balanceBefore,
      balanceAfterMicrocents: this.balanceAfter,
    };
  }

  // ── recording ──

  private record(id: CheckId, outcome: Outcome, detail: string): void {
    if (!this.results.has(id)) this.results.set(id, { id, outcome, detail });
  }

  /** The verdict of a check from its problems (a requested skip wins). */
  private verdict(id: CheckId, problems: string[], passDetail = ''): boolean {
    if (this.skip.has(id)) this.record(id, 'skip', 'skipped on request');
    else if (problems.length > 0) this.record(id, 'fail', problems.join('; '));
    else this.record(id, 'pass', passDetail);
    return problems.length === 0;
  }

  /** Runs a check that nothing else depends on (not at all when skipped); a throw is its failure. */
  private async check(id: CheckId, body: () => Promise<string[] | Finding>): Promise<void> {
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

  private skipAll(ids: CheckId[], why: string): void {
    for (const id of ids) this.record(id, 'skip', why);
  }

  private checkAborted(): void {
    if (this.signal?.aborted) throw new Interrupted('interrupted');
  }

  private get call() {
    return { signal: this.signal };
  }

  // ── phases ──

  /** Model list and pricing: no key, no cost. Ends with the cost estimate. */
  private async keyless(): Promise<void> {
    await this.check('key.prefix', async () => ({
      problems: problem(
        this.key.startsWith(this.brand.keyPrefix),
        `the key does not start with ${JSON.stringify(this.brand.keyPrefix)}: the gateway refuses such keys on /v0.2 (check the brand configuration)`,
      ),
      detail: `${this.brand.keyPrefix}…`,
    }));
    await this.check('models.list', () => this.models());
    this.model ??= this.opts.model;
    await this.check('pricing.list', async () => {
      const all = await this.client.allPricing(this.call);
      const problems = all
        .flatMap((p, i) =>
          shapeProblems(
            p,
            {
              model: 'string',
              input_microcents_per_token: 'int',
              output_microcents_per_token: 'int',
              cached_input_microcents_per_token: 'int',
            },
            `[${i}].`,
          ),
        )
        .slice(0, 3);
      const listed = this.model !== undefined && all.some((p) => isRecord(p) && p.model === this.model);
      return {
        problems,
        detail: `${all.length} pricing objects${this.model === undefined ? '' : listed ? `, ${this.model} among them` : `, ${this.model} not among them (not public?)`}`,
      };
    });
    if (this.model === undefined) this.record('pricing.model', 'skip', 'no model to price');
    else {
      const model = this.model;
      await this.check('pricing.model', async () => {
        const p = await this.client.pricing(model, this.call);
        const problems = [
          ...shapeProblems(p, {
            model: 'string',
            input_microcents_per_token: 'int',
            output_microcents_per_token: 'int',
            cached_input_microcents_per_token: 'int',
          }),
          ...problem(p.model === model, `model should be ${JSON.stringify(model)}, got ${describe(p.model)}`),
        ];
        if (problems.length === 0) this.price = p;
        return {
          problems,
          detail: `input ${p.input_microcents_per_token}, cached input ${p.cached_input_microcents_per_token}, output ${p.output_microcents_per_token} µ¢/token`,
        };
      });
    }
    if (this.model !== undefined && this.price) {
      this.estimate = estimateCost(this.model, this.price);
      this.progress(costLine(this.estimate));
    } else this.progress(`cost: unknown (no priced model); one stream and at most ${MAX_COMPLETIONS} completions`);
  }

  private async models(): Promise<{ problems: string[]; detail: string }> {
    const list = await this.client.listModels(this.call);
    const problems = [...problem(list.object === 'list', `object should be "list", got ${describe(list.object)}`)];
    const known = ['ready', 'unavailable', 'loading'];
    const odd = new Set<string>();
    list.data.forEach((m, i) => {
      problems.push(...shapeProblems(m, { id: 'string', status: 'string' }, `data[${i}].`));
      if (isRecord(m) && typeof m.status === 'string' && !known.includes(m.status)) odd.add(m.status);
    });
    const ready = list.data.filter((m) => isRecord(m) && m.status === 'ready').map((m) => m.id);
    const wanted = this.opts.model;
    if (wanted !== undefined) {
      const entry = list.data.find((m) => isRecord(m) && m.id === wanted);
      problems.push(...problem(entry !== undefined, `model ${wanted} is not listed`));
      if (entry) problems.push(...problem(entry.status === 'ready', `model ${wanted} is ${describe(entry.status)}, not ready`));
      this.model = wanted;
    } else {
      problems.push(...problem(ready.length > 0, 'no model is ready'));
      this.model = ready[0];
    }
    const extra = odd.size ? `; statuses the gateway shows as unavailable: ${[...odd].join(', ')}` : '';
    return {
      problems: problems.slice(0, 4),
      detail: `${list.data.length} models, ${ready.length} ready; using ${this.model ?? 'none'}${extra}`,
    };
  }

  /** Key checks and the balance (keyed reads, no cost). */
  private async keyed(): Promise<void> {
    await this.check('key.wrong', async () => {
      const wrong = `${this.brand.keyPrefix}conformance-${randomBytes(12).toString('hex')}`;
      const problems: string[] = [];
      const calls: [string, () => Promise<unknown>][] = [
        ['GET /billing/accounts/me/balance', () => this.client.balance(wrong, this.call)],
        ['GET /v1beta/streams/{id}', () => this.client.getStream(wrong, randomUUID(), this.call)],
      ];
      for (const [what, call] of calls) {
        const err = await call().then(
          () => undefined,
          (e: unknown) => e,
        );
        if (err === undefined) problems.push(`${what} accepted a wrong key`);
        else if (!(err instanceof UpstreamError) || err.status !== 401) problems.push(`${what}: expected 401, got ${errorText(err)}`);
        else if (!describeBody(err.body).message)
          problems.push(`${what}: the 401 body has no message the gateway reads: ${describe(err.body)}`);
      }
      return { problems, detail: '401 on the balance and on a stream read' };
    });
    await this.check('balance', async () => {
      const b = await this.client.balance(this.key, this.call);
      const problems = shapeProblems(b, { user_id: 'string', balance_microcents: 'int', balance_cents: 'int|number' });
      if (typeof b.balance_microcents === 'number') this.balanceBefore = b.balance_microcents;
      const short = this.estimate && typeof b.balance_microcents === 'number' && b.balance_microcents < this.estimate.microcents;
      return {
        problems,
        detail: `${formatCents(b.balance_microcents)} available${short ? ' (less than the estimate: completions may get 402)' : ''}`,
      };
    });
    await this.check('errors.read-not-found', async () => {
      const err = await this.client.getStream(this.key, randomUUID(), this.call).then(
        () => undefined,
        (e: unknown) => e,
      );
      if (err === undefined) return ['a stream that does not exist was read'];
      if (!(err instanceof UpstreamError) || err.status !== 404) return [`expected 404, got ${errorText(err)}`];
      const parsed = describeBody(err.body);
      if (!parsed.message && !parsed.code) return [`the 404 body is in no shape the gateway reads: ${describe(err.body)}`];
      return { problems: [], detail: parsed.stream ? `nested shape, code ${parsed.code ?? '(none)'}` : '{detail: string}' };
    });
    if (this.model === undefined) this.record('errors.stream-not-found', 'skip', 'no ready model');
    else {
      await this.check('errors.stream-not-found', async () => {
        const err = await this.complete(this.imageRequest(randomUUID(), 'frame_index=-1')).then(
          () => undefined,
          (e: unknown) => e,
        );
        return expectStreamError(err, [404], 'stream_not_found');
      });
    }
  }

  /** Everything that needs the one stream; the stream is deleted by `cleanUp` whatever happens here. */
  private async withStream(): Promise<void> {
    const streamChecks: CheckId[] = [
      'stream.create',
      'stream.read',
      'region.echo',
      'region.wrong',
      'stream.keepalive',
      'viewer-token',
      'room.whip',
      'frames.first',
      ...FRAME_CHECKS,
      'stream.delete',
      'stream.after-delete',
    ];
    this.checkAborted();
    this.progress('creating one stream');
    let created: CreateStreamResponse;
    try {
      // Not abortable: a create cut off in flight could leave a stream whose id the kit never learns.
      created = await this.client.createStream(this.key);
    } catch (err) {
      this.checkAborted();
      this.record('stream.create', 'fail', errorText(err));
      return this.skipAll(streamChecks, 'no stream');
    }
    const id = typeof created.id === 'string' && UUID_RE.test(created.id) ? created.id : undefined;
    this.streamId = id;
    this.created = created;
    if (id) this.progress(`stream ${id} created`);
    const createOk = this.verdict(
      'stream.create',
      createProblems(created, this.brand),
      `ttl ${describe(created.ttl_seconds)} s, publish ${describe(created.publish?.type)}`,
    );
    if (!id) return this.skipAll(streamChecks, 'the create response has no usable id');
    this.checkAborted();

    let stream: Stream | undefined;
    try {
      stream = await this.client.getStream(this.key, id, this.call);
      this.verdict('stream.read', readProblems(stream, id), `state ${stream.state}, last_frame_at_ms ${describe(stream.last_frame_at_ms)}`);
    } catch (err) {
      this.checkAborted();
      this.record('stream.read', 'fail', errorText(err));
    }
    await this.regions(id);
    await this.check('stream.keepalive', async () => {
      const ka = await this.client.keepalive(this.key, id, this.call);
      const problems = [
        ...shapeProblems(ka, { expires_at_ms: 'int', publish: 'object' }),
        ...problem(
          isRecord(ka.publish) && typeof ka.publish.token === 'string' && ka.publish.token !== '',
          'publish.token should be a non-empty string',
        ),
        ...problem(
          ka.stream_time_ms === undefined || typeof ka.stream_time_ms === 'number',
          `stream_time_ms should be a number, got ${describe(ka.stream_time_ms)}`,
        ),
        ...problem(typeof created.expires_at_ms !== 'number' || ka.expires_at_ms >= created.expires_at_ms, 'expires_at_ms moved backwards'),
      ];
      return {
        problems,
        detail: `expires_at_ms +${typeof created.expires_at_ms === 'number' ? ka.expires_at_ms - created.expires_at_ms : '?'} ms`,
      };
    });
    await this.check('viewer-token', () => this.viewerToken(id));
    // Before any publisher joins: the synthetic WHIP session uses the stream's publish identity.
    await this.check('room.whip', async () => {
      const publish = created.publish;
      if (!isRecord(publish) || typeof publish.url !== 'string' || typeof publish.token !== 'string') {
        return { problems: [], skip: 'the create response has no publish url and token' };
      }
      return whipVerdict(publish.url, publish.token, this.signal);
    });

    const frames = await this.firstFrames(id, createOk ? created : undefined);
    const frameChecks = FRAME_CHECKS;
    if (!frames) this.skipAll(frameChecks, 'no frames (see frames.first)');
    else if (this.model === undefined) this.skipAll(frameChecks, 'no ready model');
    else await this.completionChecks(id, frames);

    await this.stopPublisher();
    this.checkAborted();
    this.progress(`deleting stream ${id}`);
    try {
      const d = await this.client.deleteStream(this.key, id, this.call);
      this.deleted = true;
      this.verdict('stream.delete', [
        ...problem(!d.alreadyGone, 'answered 404: the stream was already gone'),
        ...problem(d.id === id, `id should be ${id}, got ${describe(d.id)}`),
      ]);
    } catch (err) {
      this.checkAborted();
      this.record('stream.delete', 'fail', errorText(err));
      return this.record('stream.after-delete', 'skip', 'the delete failed');
    }
    await this.check('stream.after-delete', () => this.afterDelete(id));
  }

  private async regions(id: string): Promise<void> {
    let serving: string | undefined;
    await this.check('region.echo', async () => {
      const res = await this.raw('GET', `/v1beta/streams/${id}`);
      if (res.status !== 200) return [`GET stream: ${errorText(httpError(res.status, parseLenient(res.text), undefined))}`];
      const value = res.headers.get(this.brand.regionHeaderDisplay);
      if (value === null) {
        let other: string | undefined;
        res.headers.forEach((_v, h) => (other ??= /^x-.+-region$/i.test(h) ? h : undefined));
        return [
          `no ${this.brand.regionHeaderDisplay} header${other ? ` (the upstream sends ${other}: check the brand configuration)` : ''}`,
        ];
      }
      serving = value;
      return {
        problems: problem((REGIONS as readonly string[]).includes(value), `unknown region ${JSON.stringify(value)}`),
        detail: `${this.brand.regionHeaderDisplay}: ${value}`,
      };
    });
    await this.check('region.wrong', async () => {
      const outcomes = [];
      for (const region of REGIONS) {
        const err = await this.client.getStream(this.key, id, { ...this.call, region }).then(
          () => undefined,
          (e: unknown) => e,
        );
        outcomes.push({ region, err });
      }
      const ok = outcomes.filter((o) => o.err === undefined);
      const refused = outcomes.filter((o) => o.err !== undefined);
      const problems: string[] = [];
      if (ok.length !== 1)
        problems.push(
          ok.length === 0 ? 'no region was accepted' : `every region was accepted (${REGIONS.join(', ')}): no 409 for a wrong region`,
        );
      if (serving && ok.length === 1 && ok[0]!.region !== serving)
        problems.push(`${ok[0]!.region} was accepted but the echoed region is ${serving}`);
      for (const { region, err } of refused) {
        const parsed = err instanceof UpstreamError ? describeBody(err.body) : undefined;
        if (!(err instanceof UpstreamError) || err.status !== 409 || parsed?.code !== 'region_error')
          problems.push(`${region}: expected 409 region_error, got ${errorText(err)}`);
      }
      return { problems, detail: `${ok.map((o) => o.region).join('') || '-'} 200, ${refused.map((o) => o.region).join(', ') || '-'} 409` };
    });
  }

  private async viewerToken(id: string): Promise<{ problems: string[]; detail: string }> {
    const res = await this.raw('POST', `/v1beta/streams/${id}/viewer-token`, {});
    if (res.status === 404 || res.status === 405) {
      return { problems: [`not served: HTTP ${res.status} ${describeBody(parseLenient(res.text)).message ?? ''}`.trim()], detail: '' };
    }
    if (res.status < 200 || res.status > 299)
      return { problems: [errorText(httpError(res.status, parseLenient(res.text), undefined))], detail: '' };
    const body = parseLenient(res.text);
    if (!isRecord(body)) return { problems: ['the body is not a JSON object'], detail: '' };
    const view = body.view;
    const problems = [...shapeProblems(view, { url: 'string', token: 'string', expires_in_seconds: 'int' }, 'view.')];
    if (isRecord(view)) {
      problems.push(
        ...problem(typeof view.url !== 'string' || /^wss?:\/\//.test(view.url), `view.url should be ws(s)://, got ${describe(view.url)}`),
      );
      problems.push(
        ...problem(
          typeof view.expires_in_seconds !== 'number' || view.expires_in_seconds > 0,
          'view.expires_in_seconds should be positive',
        ),
      );
    }
    return { problems, detail: isRecord(view) ? `expires in ${describe(view.expires_in_seconds)} s` : '' };
  }

  /**
   * Waits for the first frame and a full clip (what the gateway's scheduler waits for), publishing
   * a test pattern itself when the mode says so. Undefined: no frames (checked as `frames.first`).
   */
  private async firstFrames(id: string, created: CreateStreamResponse | undefined): Promise<Stream | undefined> {
    const mode = this.opts.publish ?? 'auto';
    const started = Date.now();
    const deadline = started + (this.opts.frameTimeoutMs ?? 30_000);
    const publishAt = mode === 'always' ? started : mode === 'auto' ? started + (this.opts.autoPublishAfterMs ?? 5000) : Infinity;
    let publishError: string | undefined;
    let first: Stream | undefined;
    let firstAfterMs = 0;
    this.progress(mode === 'always' ? 'publishing a test pattern; waiting for the first frame' : 'waiting for the first frame');
    for (;;) {
      this.checkAborted();
      let s: Stream;
      try {
        s = await this.client.getStream(this.key, id, this.call);
      } catch (err) {
        this.checkAborted();
        this.record('frames.first', 'fail', `reading the stream: ${errorText(err)}`);
        return undefined;
      }
      if (s.state !== 'active') {
        this.record('frames.first', 'fail', `the stream ended while waiting (end_reason ${describe(s.end_reason)})`);
        return undefined;
      }
      if (s.last_frame_at_ms !== null && s.last_frame_at_ms !== undefined && !first) {
        first = s;
        firstAfterMs = Date.now() - started;
      }
      const now = Date.now();
      if (first && (typeof s.stream_time_ms !== 'number' || s.stream_time_ms >= CLIP_MS || now >= deadline)) {
        const source = this.publisher
          ? `published by the kit (${this.publisher.framesPublished} frames sent)`
          : "the upstream's own publisher";
        const problems = [
          ...shapeProblems(s, {
            first_frame_at_ms: 'int',
            last_frame_at_ms: 'int',
            last_frame_index: 'int',
            first_available_frame_index: 'int',
            first_available_frame_at_ms: 'int',
            stream_time_ms: 'number',
          }),
          ...problem(
            typeof s.last_frame_index !== 'number' ||
              typeof s.first_available_frame_index !== 'number' ||
              s.first_available_frame_index <= s.last_frame_index,
            'first_available_frame_index is after last_frame_index',
          ),
        ];
        const ok = this.verdict('frames.first', problems, `after ${firstAfterMs} ms, ${source}; last_frame_index ${s.last_frame_index}`);
        return ok ? s : undefined;
      }
      if (!first && now >= deadline) {
        const waited = Math.round((now - started) / 1000);
        if (this.publisher)
          this.record(
            'frames.first',
            'fail',
            `the kit published ${this.publisher.framesPublished} frames into the room, but no frame was reported within ${waited} s`,
          );
        else
          this.record(
            'frames.first',
            'skip',
            `no frame within ${waited} s and no publisher: ${publishError ?? `publishing is off (--publish ${mode})`}`,
          );
        return undefined;
      }
      if (!first && now >= publishAt && !this.publisher && publishError === undefined) {
        if (!created) publishError = 'the create response has no usable publish url and token';
        else {
          this.progress(`publishing a test pattern into ${created.publish.url}`);
          try {
            this.publisher = await publishTestPattern(
              created.publish.url,
              created.publish.token,
              this.opts.logger ?? createLogger('silent'),
            );
          } catch (err) {
            publishError = `could not publish into the room: ${errorText(err)}`;
            this.progress(publishError);
          }
        }
      }
      await sleep(POLL_MS, this.signal).catch(() => undefined);
    }
  }

  private async completionChecks(id: string, stream: Stream): Promise<void> {
    const ref = (query: string) => `${this.brand.scheme}://streams/${id}?${query}`;
    const threadId = `conformance-${id}`;
    let clip: ChatCompletionResponse | undefined;
    await this.check('completion.clip', async () => {
      const req: ChatCompletionRequest = {
        model: this.model!,
        messages: [
          {
            role: 'user',
            content: [
              { type: 'text', text: PROMPT },
              { type: 'video_url', video_url: { url: ref(`start_offset_ms=-${CLIP_MS}&max_fps=${CLIP_FPS}`) } },
            ],
          },
        ],
        max_completion_tokens: OUTPUT_CAP,
        thread_id: threadId,
        stream: false,
      };
      clip = await this.complete(req);
      return this.completionVerdict(clip);
    });
    if (!clip) this.record('prompt-cache', 'skip', 'no clip completion');
    else {
      const response = clip;
      await this.check('prompt-cache', async () => this.cacheVerdict(response, threadId));
    }
    await this.check('completion.frame', async () => this.completionVerdict(await this.complete(this.imageRequest(id, 'frame_index=-1'))));
    await this.check('completion.sse', () => this.sse(id));
    await this.check('reference.future-frame', async () => {
      const future = (stream.last_frame_index ?? 0) + 1_000_000;
      const err = await this.complete(this.imageRequest(id, `frame_index=${future}`)).then(
        () => undefined,
        (e: unknown) => e,
      );
      // The contract says 422; the provider's error page lists 409 for this code.
      const verdict = expectStreamError(err, [422, 409], 'frame_not_yet_produced');
      return { ...verdict, detail: `${verdict.detail}; ${readingOf(err)}` };
    });
    await this.check('reference.repeated-key', async () => {
      const err = await this.complete(this.imageRequest(id, 'frame_index=-1&frame_index=-1')).then(
        () => undefined,
        (e: unknown) => e,
      );
      return repeatedKeyVerdict(err);
    });
  }

  private completionVerdict(r: ChatCompletionResponse): { problems: string[]; detail: string } {
    const problems = completionProblems(r);
    const choice: unknown = Array.isArray(r.choices) ? r.choices[0] : undefined;
    const usage = r.usage as unknown;
    const cost = this.charge(r);
    const content =
      isRecord(choice) && isRecord(choice.message) && typeof choice.message.content === 'string' ? choice.message.content : '';
    return {
      problems,
      detail: `${isRecord(usage) ? `${describe(usage.prompt_tokens)} in / ${describe(usage.completion_tokens)} out tokens, ${cost} µ¢` : ''}; "${content.slice(0, 40)}${content.length > 40 ? '…' : ''}"`,
    };
  }

  private cacheVerdict(r: ChatCompletionResponse, threadId: string): Finding {
    const field = this.brand.responseField;
    const cache = cacheInfo(r, this.brand);
    if (!cache) {
      const elsewhere = Object.keys(r).find((k) => isRecord(r[k]) && isRecord((r[k] as Record<string, unknown>).cache));
      if (elsewhere)
        return {
          problems: [
            `the cache details are under ${JSON.stringify(elsewhere)}, not ${JSON.stringify(field)}: check the brand configuration`,
          ],
          detail: '',
        };
      // The contract lets a response leave them out: nothing to hold the upstream to.
      return { problems: [], skip: `no ${field}.cache in the response (the contract allows that)` };
    }
    const problems = [
      ...shapeProblems(cache, { thread_id: 'string|null', cache_hit: 'boolean', cached_input_tokens: 'int' }, `${field}.cache.`),
      ...problem(
        cache.thread_id === threadId,
        `${field}.cache.thread_id should echo ${JSON.stringify(threadId)}, got ${describe(cache.thread_id)}`,
      ),
    ];
    return { problems, detail: `${field}.cache: hit ${describe(cache.cache_hit)}, ${describe(cache.cached_input_tokens)} cached tokens` };
  }

  private async sse(id: string): Promise<{ problems: string[]; detail: string }> {
    this.count();
    const body = { ...this.imageRequest(id, 'frame_index=-1'), stream: true, stream_options: { include_usage: true } };
    const res = await this.raw('POST', '/v1beta/chat/completions', body);
    if (res.status !== 200) return { problems: [errorText(httpError(res.status, parseLenient(res.text), undefined))], detail: '' };
    const v = checkSse(res.headers.get('content-type'), res.text);
    if (v.usage && this.price) this.spent += costMicrocents(this.price, v.usage);
    return {
      problems: v.problems,
      detail: `${v.chunks} chunks${v.usage ? ', usage chunk' : ''}; "${v.text.slice(0, 30)}${v.text.length > 30 ? '…' : ''}"`,
    };
  }

  private async afterDelete(id: string): Promise<string[]> {
    const problems: string[] = [];
    const ka = await this.client.keepalive(this.key, id, this.call).then(
      () => undefined,
      (e: unknown) => e,
    );
    if (ka === undefined) problems.push('keepalive renewed a deleted stream');
    else if (!(ka instanceof UpstreamError) || ka.status !== 404) problems.push(`keepalive: expected 404, got ${errorText(ka)}`);
    try {
      const s = await this.client.getStream(this.key, id, this.call);
      if (s.state !== 'ended' || s.end_reason !== 'deleted')
        problems.push(`read: expected state ended, end_reason deleted, got ${describe(s.state)}, ${describe(s.end_reason)}`);
    } catch (err) {
      if (!(err instanceof UpstreamError) || err.status !== 404)
        problems.push(`read: expected the ended stream or 404, got ${errorText(err)}`);
    }
    if (this.model !== undefined) {
      const err = await this.complete(this.imageRequest(id, 'frame_index=-1')).then(
        () => undefined,
        (e: unknown) => e,
      );
      if (err === undefined) problems.push('a completion on the deleted stream was answered');
      else if (!(err instanceof UpstreamError) || err.status !== 404) problems.push(`completion: expected 404, got ${errorText(err)}`);
    }
    try {
      await this.client.deleteStream(this.key, id, this.call);
    } catch (err) {
      problems.push(`a second delete failed (delete is idempotent): ${errorText(err)}`);
    }
    return problems;
  }

  // ── calls ──

  private imageRequest(id: string, query: string): ChatCompletionRequest {
    const image: ContentPart = { type: 'image_url', image_url: { url: `${this.brand.scheme}://streams/${id}?${query}` } };
    return {
      model: this.model!,
      messages: [{ role: 'user', content: [{ type: 'text', text: PROMPT }, image] }],
      max_completion_tokens: OUTPUT_CAP,
      stream: false,
    };
  }

  private count(): void {
    if (this.completions >= MAX_COMPLETIONS) throw new Error(`the kit's bound of ${MAX_COMPLETIONS} completions is reached`);
    this.completions++;
  }

  /** One completion through the gateway's client, with no fallback model (the kit asks one model). */
  private async complete(req: ChatCompletionRequest): Promise<ChatCompletionResponse> {
    this.count();
    const { response } = await this.client.chatCompletion(this.key, req, { ...this.call, fallbackModels: [] });
    return response;
  }

  private charge(r: ChatCompletionResponse): number {
    if (!this.price || !isRecord(r.usage) || typeof r.usage.prompt_tokens !== 'number' || typeof r.usage.completion_tokens !== 'number')
      return 0;
    const cost = costMicrocents(this.price, r.usage, cacheInfo(r, this.brand)?.cached_input_tokens ?? 0);
    this.spent += cost;
    return cost;
  }

  /** An HTTP exchange the client has no method for (SSE, response headers, the viewer token). */
  private async raw(method: string, path: string, body?: unknown): Promise<{ status: number; headers: Headers; text: string }> {
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

  // ── the end ──

  private async stopPublisher(): Promise<void> {
    const p = this.publisher;
    this.publisher = undefined;
    await p?.stop().catch(() => undefined);
  }

  /** Deletes the stream if the run did not get to (failure, abort), then reads the balance again. */
  private async cleanUp(): Promise<void> {
    await this.stopPublisher();
    if (this.streamId && !this.deleted) {
      this.progress(`deleting stream ${this.streamId}`);
      try {
        // No signal: an interrupted run must still delete its stream.
        await this.client.deleteStream(this.key, this.streamId);
        this.deleted = true;
      } catch (err) {
        this.progress(
          `could not delete stream ${this.streamId}: ${errorText(err)} (its lease ends it within ${describe(this.created?.ttl_seconds)} s)`,
        );
      }
    }
    if (this.streamId && this.deleted) this.progress(`stream ${this.streamId} deleted`);
    if (!this.signal?.aborted && this.balanceBefore !== undefined) {
      this.balanceAfter = await this.client.balance(this.key).then(
        (b) => (typeof b.balance_microcents === 'number' ? b.balance_microcents : undefined),
        () => undefined,
      );
    }
    await this.client.close();
  }
}

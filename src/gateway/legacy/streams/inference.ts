/**
 * The per-tick inference of a legacy stream: one chat completion about the current window (with
 * fallbacks, inside a cadence-tied budget), published as one legacy result. Upstream answers that
 * end the stream (402, a gone stream) go to the end path, the commit's answer to the record upkeep.
 */
import { childAbort } from '../../../lib/abort';
import { ATTR, inSpan } from '../../../lib/spans';
import type { Span } from '../../../lib/spans';
import type { Clock } from '../../../lib/timers';
import type { ChatCompletionResponse } from '../../../upstream/client';
import { DEFAULT_TIMEOUTS, UpstreamError, failureCause, isUpstreamCode, isUpstreamStatus } from '../../../upstream/client';
import { schemaMismatch } from '../contract/output-schema';
import { RateLimitBackoff } from './rate-limit-backoff';
import { ResultWindowRecorder } from './result-window';
import { encodeEnvelope, resultId, resultsChannel } from './results-channel';
import type { RecordSync } from './record-sync';
import type { StreamEnd } from './end';
import type { LiveStream } from './live-stream';
import type { StreamsContext } from './ports';
import type { TickCommitInput } from '../../store/store';
import type { TickInfo } from './ticker';
import { buildCompletionRequest } from '../contract/upstream-request';
import { toLegacyResult } from '../contract/responses';
import { legacyResultError } from '../contract/upstream-errors';

export class TickInference {
  /** Each committed result's window on the stream clock, for reinfer. */
  private readonly windows: ResultWindowRecorder;
  /** Keys held back by an upstream 429, on this replica. */
  private readonly backoff = new RateLimitBackoff();

  constructor(
    private readonly deps: StreamsContext,
    private readonly ender: StreamEnd,
    private readonly sync: RecordSync,
  ) {
    this.windows = new ResultWindowRecorder(deps);
  }

  private get clock(): Clock {
    return this.deps.clock;
  }

  /**
   * One tick: a chat completion about the current window, published as one legacy result through
   * the store's fenced commit (never a bare publish: a replica that lost the stream publishes nothing).
   * Traced as `legacy.tick`, a trace of its own linked to the stream's create, its outcome an attribute.
   */
  run(stream: LiveStream, tick: TickInfo): Promise<void> {
    const { record } = stream;
    const attributes = {
      [ATTR.streamId]: record.streamId,
      [ATTR.tick]: tick.n,
      [ATTR.latenessMs]: Math.round(tick.latenessMs),
      [ATTR.epoch]: record.epoch,
    };
    // Taken now, before any await: ticks start in tick order, so they commit in it too.
    const turn = stream.commitTurn();
    return inSpan('legacy.tick', { parent: 'root', link: record.ids, attributes }, (span) => this.tick(stream, tick, span, turn)).finally(
      turn.done,
    );
  }

  private async tick(stream: LiveStream, tick: TickInfo, span: Span | undefined, turn: { before: Promise<void> }): Promise<void> {
    const { upstream, brand, catalog, observer, store } = this.deps;
    const { record } = stream;
    const outcome = (o: string) => void span?.setAttribute(ATTR.tickOutcome, o);
    observer?.tickLateness?.(tick.latenessMs);
    if (
      this.backoff.holds(
        record.keyHash,
        this.clock.now(),
        stream.backoffJitter(() => this.backoff.jitter()),
      )
    ) {
      outcome('rate_limited');
      return void observer?.rateLimited?.('tick_skipped');
    }
    this.windows.prepare(stream);
    const prompt = record.prompt;
    const body = buildCompletionRequest(record.spec, record.streamId, brand, { threadId: stream.threadId, prompt });
    const started = this.clock.now();
    let response: ChatCompletionResponse | undefined;
    let model = record.spec.model;
    let error: string | null = null;
    const budget = this.tickBudget(stream);
    let sentAtMs: number | undefined;
    try {
      const r = await upstream.chatCompletion(stream.apiKey, body, {
        signal: budget.signal,
        timeouts: { headersMs: budget.attemptMs, bodyMs: budget.attemptMs },
        ...record.ids,
        fallbackModels: record.fallbackModels,
        isModelReady: (id) => catalog.isReady(id),
        onAttempt: () => (sentAtMs = this.clock.now()),
      });
      response = r.response;
      observer?.upstreamReach?.(true);
      model = r.model;
      span?.setAttribute(ATTR.attempts, r.attempts);
      // A fallback answer means the requested model failed: the saturation view must see that.
      if (r.fallbackUsed) catalog.recordOutcome(record.spec.model, false);
      catalog.recordOutcome(model, true);
    } catch (err) {
      if (stream.stopping) return outcome('stopped');
      if (err instanceof UpstreamError) observer?.upstreamError?.(err.status);
      observer?.upstreamReach?.(reachedUpstream(err));
      // Rate limited: this tick reports it, the key's ticks pause for the hinted time; never an end.
      if (isUpstreamStatus(err, 429)) {
        this.backoff.limited(record.keyHash, this.clock.now(), err.retryAfterMs);
        observer?.rateLimited?.('limited');
      }
      // Out of credits, or the upstream stream is gone: the stream ends for that reason.
      if (isUpstreamStatus(err, 402) || (isUpstreamStatus(err, 404) && isUpstreamCode(err, 'stream_not_found'))) {
        outcome('stream_lost');
        return void this.ender.onUpstreamLoss(stream, err);
      }
      const modelsFault =
        err instanceof UpstreamError && err.code !== 'upstream_circuit_open' && (err.status === 503 || err.kind !== 'http');
      if (modelsFault) catalog.recordOutcome(model, false);
      if (err instanceof UpstreamError) this.logFailure(record, err);
      error = legacyResultError(err);
    } finally {
      budget.done();
    }
    span?.setAttribute(ATTR.model, model);
    if (stream.stopping) return outcome('stopped');
    // performance.now(): the gateway's own overhead per result is sub-millisecond.
    const answeredAt = performance.now();
    const inferenceMs = this.clock.now() - started;
    if (response && stream.validate) {
      const text = response.choices?.[0]?.message?.content;
      error = schemaMismatch(stream.validate, text);
    }
    const cost = response ? await this.deps.catalog.completionCost(model, response, this.deps.brand) : 0;
    const result = toLegacyResult({
      id: resultId(record.streamId, tick.n),
      streamId: record.streamId,
      spec: record.spec,
      prompt,
      completion: error ? null : response,
      error,
      modelName: model,
      inferenceLatencyMs: inferenceMs,
      totalLatencyMs: this.clock.now() - tick.dueAtMs,
    });
    span?.setAttribute(ATTR.resultId, result.id);
    // An earlier tick still running (the completions overlap) commits first: results stay in tick order.
    await turn.before;
    if (stream.stopping) return outcome('stopped');
    const committing: TickCommitInput = {
      owner: this.deps.replicaId,
      epoch: record.epoch,
      tick: tick.n,
      costMicrocents: cost,
      channel: resultsChannel(record.streamId),
      message: encodeEnvelope({ kind: 'result', json: JSON.stringify(result) }),
      outcome: { ok: result.ok, inferenceMs },
    };
    const commit = await store.commitTick(record.streamId, committing);
    this.sync.onCommit(stream, tick.n, commit);
    outcome(commit.ok ? (result.ok ? 'ok' : 'error') : commit.reason);
    if (!commit.ok) return;
    if (sentAtMs !== undefined) void this.windows.record(stream, result.id, sentAtMs);
    observer?.inference?.({
      keyHash: record.keyHash,
      model,
      ok: result.ok,
      tokens: response?.usage?.completion_tokens ?? 0,
      inferenceMs,
      totalMs: result.total_latency_ms,
      overheadMs: performance.now() - answeredAt,
    });
  }

  /**
   * A tick's upstream failure, one line and no stack (what the upstream said, or why it could not
   * be reached, is the story): the stream, the model asked for and its fallbacks (the error is the
   * last one tried's). An answer that refuses (a 4xx: the request's or the key's business, a 429)
   * is info; a 5xx answer (a 503 `model_unavailable`) or no answer is warn.
   */
  private logFailure(record: LiveStream['record'], err: UpstreamError): void {
    const { logger } = this.deps;
    const models = {
      streamId: record.streamId,
      model: record.spec.model,
      ...(record.fallbackModels.length ? { fallbacks: record.fallbackModels } : {}),
    };
    if (err.kind !== 'http') {
      logger.warn({ ...models, code: err.code, kind: err.kind, err: err.message }, 'inference failed upstream');
      return;
    }
    const fields = { ...models, status: err.status, code: err.code };
    const msg = `inference refused upstream: ${failureCause(err)}`;
    if (err.status >= 500) logger.warn(fields, msg);
    else logger.info(fields, msg);
  }

  /**
   * Time a tick may spend on the upstream, tied to the stream's cadence: each completion attempt
   * gets `attemptTimeoutIntervals` intervals (1 s to 30 s), and the whole tick (retries and
   * fallbacks) `tickDeadlineIntervals` intervals (at least 2 s); past it the tick publishes an
   * `upstream_timeout` error result instead of leaving the client with nothing.
   */
  private tickBudget({ record, signal }: LiveStream): { signal: AbortSignal; attemptMs: number; done(): void } {
    const f = this.deps.cfg.upstreamFailures;
    const interval = record.spec.intervalMs;
    const attemptMs = Math.min(Math.max(1000, interval * f.attemptTimeoutIntervals), DEFAULT_TIMEOUTS.headersMs);
    const tick = childAbort(signal);
    const timer = this.clock.setTimeout(
      () => tick.abort(new UpstreamError({ kind: 'timeout', status: 504, message: 'tick deadline passed' })),
      Math.max(2000, interval * f.tickDeadlineIntervals),
    );
    return {
      signal: tick.signal,
      attemptMs,
      done: () => {
        this.clock.clearTimeout(timer);
        tick.done();
      },
    };
  }
}

/**
 * Whether a failed tick still reached the upstream: an answer below 500 did (a refusal, a missing
 * frame, a rate limit); no answer, a timeout, a 5xx or an open circuit did not.
 */
function reachedUpstream(err: unknown): boolean {
  if (!(err instanceof UpstreamError)) return true;
  if (err.code === 'upstream_circuit_open') return false;
  return err.kind === 'http' && err.status < 500;
}

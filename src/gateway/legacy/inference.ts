/**
 * The per-tick inference of a legacy stream: one chat completion about the current window (with
 * fallbacks, inside a cadence-tied budget), published as one legacy result. Upstream answers that
 * end the stream (402, a gone stream) are handed back through `TickOutcomes`.
 */
import { costMicrocents } from '../../lib/wire';
import { realClock } from '../../lib/timers';
import type { Clock } from '../../lib/timers';
import type { ChatCompletionResponse } from '../../upstream/client';
import type { TickCommit } from '../store/store';
import { DEFAULT_TIMEOUTS, UpstreamError, cacheInfo, isUpstreamCode, isUpstreamStatus } from '../../upstream/client';
import { schemaMismatch } from './output-schema';
import { resultId } from './ownership';
import { ResultWindowRecorder } from './result-window';
import { resultEnvelope, resultsChannel } from './results-socket';
import { SOLO_REPLICA } from './session-ports';
import type { LiveSession, SessionDeps } from './session-ports';
import type { TickInfo } from './ticker';
import { buildCompletionRequest, toLegacyResult } from './translate';
import { legacyResultError } from './upstream-errors';

/** What a tick's failure may do to its stream (implemented by the lifecycle). */
export interface TickOutcomes {
  /** No credits left: end with `insufficient_credits`. */
  outOfCredits(session: LiveSession): void;
  /** The upstream stream is gone: end with the reason the upstream gives. */
  upstreamLost(session: LiveSession, err: unknown): void;
  /** The store's answer to the tick's commit (a new prompt revision, fenced, ended, lost record). */
  committed(session: LiveSession, tick: number, commit: TickCommit): void;
}

export class TickInference {
  private readonly clock: Clock;
  /** Each committed result's window on the stream clock, for reinfer. */
  private readonly windows: ResultWindowRecorder;

  constructor(
    private readonly deps: SessionDeps,
    private readonly outcomes: TickOutcomes,
  ) {
    this.clock = deps.clock ?? realClock;
    this.windows = new ResultWindowRecorder(deps);
  }

  /**
   * One tick: a chat completion about the current window, published as one legacy result through
   * the store's fenced commit (never a bare publish: a replica that lost the stream publishes nothing).
   */
  async run(session: LiveSession, tick: TickInfo): Promise<void> {
    const { upstream, brand, catalog, observer, store, fleet } = this.deps;
    observer?.tickLateness?.(tick.latenessMs);
    const prompt = session.prompt;
    const body = buildCompletionRequest(session.spec, session.streamId, brand, { threadId: session.threadId, prompt });
    const started = this.clock.now();
    let response: ChatCompletionResponse | undefined;
    let model = session.spec.model;
    let error: string | null = null;
    const budget = this.tickBudget(session);
    let sentAtMs: number | undefined;
    try {
      const r = await upstream.chatCompletion(session.apiKey, body, {
        signal: budget.signal,
        timeouts: { headersMs: budget.attemptMs, bodyMs: budget.attemptMs },
        ...session.ids,
        fallbackModels: session.fallbackModels,
        isModelReady: (id) => catalog.isReady(id),
        onAttempt: () => (sentAtMs = this.clock.now()),
      });
      response = r.response;
      model = r.model;
      // A fallback answer means the requested model failed: the saturation view must see that.
      if (r.fallbackUsed) catalog.recordOutcome(session.spec.model, false);
      catalog.recordOutcome(model, true);
    } catch (err) {
      if (session.ending) return;
      if (err instanceof UpstreamError) observer?.upstreamError?.(err.status);
      if (isUpstreamCode(err, 'frame_not_yet_produced')) return; // nothing to look at yet: skip quietly
      if (isUpstreamStatus(err, 402)) return this.outcomes.outOfCredits(session);
      if (isUpstreamStatus(err, 404) && isUpstreamCode(err, 'stream_not_found')) return this.outcomes.upstreamLost(session, err);
      const modelsFault = err instanceof UpstreamError && err.code !== 'upstream_circuit_open' && (err.status === 503 || err.kind !== 'http');
      if (modelsFault) catalog.recordOutcome(model, false);
      if (err instanceof UpstreamError && err.kind !== 'http') {
        this.deps.logger.warn({ streamId: session.streamId, code: err.code, kind: err.kind, err: err.message }, 'inference failed upstream');
      }
      error = legacyResultError(err);
    } finally {
      budget.done();
    }
    if (session.ending) return;
    // performance.now(): the gateway's own overhead per result is sub-millisecond.
    const answeredAt = performance.now();
    const inferenceMs = this.clock.now() - started;
    if (response && session.validate) {
      const text = response.choices?.[0]?.message?.content;
      error = schemaMismatch(session.validate, text);
    }
    const cost = response?.usage ? await this.costOf(model, response) : 0;
    const result = toLegacyResult({
      id: resultId(session.streamId, tick.n),
      streamId: session.streamId,
      spec: session.spec,
      prompt,
      completion: error ? null : response,
      error,
      modelName: model,
      inferenceLatencyMs: inferenceMs,
      totalLatencyMs: this.clock.now() - tick.dueAtMs,
    });
    if (session.ending) return;
    const commit = await store.commitTick(session.streamId, {
      owner: fleet?.replicaId ?? SOLO_REPLICA,
      epoch: session.epoch,
      tick: tick.n,
      costMicrocents: cost,
      channel: resultsChannel(session.streamId),
      message: resultEnvelope(JSON.stringify(result)),
    });
    this.outcomes.committed(session, tick.n, commit);
    if (!commit.ok) return;
    if (sentAtMs !== undefined) void this.windows.record(session, result.id, sentAtMs);
    observer?.inference?.({
      keyHash: session.keyHash,
      model,
      ok: result.ok,
      tokens: response?.usage?.completion_tokens ?? 0,
      inferenceMs,
      totalMs: result.total_latency_ms,
      overheadMs: performance.now() - answeredAt,
    });
  }

  private async costOf(model: string, response: ChatCompletionResponse): Promise<number> {
    const price = await this.deps.catalog.pricing(model);
    if (!price || !response.usage) return 0;
    return costMicrocents(price, response.usage, cacheInfo(response, this.deps.brand)?.cached_input_tokens ?? 0);
  }

  /**
   * Time a tick may spend on the upstream, tied to the stream's cadence: each completion attempt
   * gets `attemptTimeoutIntervals` intervals (1 s to 30 s), and the whole tick (retries and
   * fallbacks) `tickDeadlineIntervals` intervals (at least 2 s); past it the tick publishes an
   * `upstream_timeout` error result instead of leaving the client with nothing.
   */
  private tickBudget(session: LiveSession): { signal: AbortSignal; attemptMs: number; done(): void } {
    const f = this.deps.cfg.upstreamFailures;
    const interval = session.spec.intervalMs;
    const attemptMs = Math.min(Math.max(1000, interval * f.attemptTimeoutIntervals), DEFAULT_TIMEOUTS.headersMs);
    const deadline = new AbortController();
    const timer = this.clock.setTimeout(
      () => deadline.abort(new UpstreamError({ kind: 'timeout', status: 504, message: 'tick deadline passed' })),
      Math.max(2000, interval * f.tickDeadlineIntervals),
    );
    return { signal: AbortSignal.any([session.abort.signal, deadline.signal]), attemptMs, done: () => this.clock.clearTimeout(timer) };
  }
}

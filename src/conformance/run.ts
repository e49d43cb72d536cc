/**
 * The conformance run: every behaviour of a /v1beta + /billing upstream the gateway relies on,
 * checked through the gateway's own `UpstreamClient` (raw HTTP only where it has no method: SSE,
 * response headers, the viewer token). It creates at most one stream and deletes it on every path,
 * the caller's abort (Ctrl-C) included, and issues at most `MAX_COMPLETIONS` completions.
 */
import type { Brand } from '../brand';
import type { Logger } from '../lib/logger';
import type { UpstreamTimeouts } from '../upstream/client';
import { CHECK_IDS } from './checks';
import type { CheckId } from './checks';
import type { CostEstimate } from './cost';
import { keyedChecks } from './keyed-checks';
import { keylessChecks } from './keyless-checks';
import { Interrupted, RunContext } from './run-context';
import { streamChecks } from './stream-checks';
import { describe } from './shapes';
import { errorText } from './verdicts';

export type PublishMode = 'auto' | 'always' | 'never';

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

/** Runs every check against the upstream; never throws for an upstream's behaviour. */
export async function runConformance(opts: ConformanceOptions): Promise<ConformanceReport> {
  const run = new RunContext(opts);
  let interrupted = false;
  try {
    await keylessChecks(run);
    await keyedChecks(run);
    await streamChecks(run);
  } catch (err) {
    if (!(err instanceof Interrupted) && !run.signal?.aborted) throw err;
    interrupted = true;
  } finally {
    await cleanUp(run);
  }
  return reportOf(run, interrupted);
}

/** Every check's result in `CHECK_IDS` order (those never reached skipped), and the run's figures. */
function reportOf(run: RunContext, interrupted: boolean): ConformanceReport {
  for (const id of CHECK_IDS) if (!run.results.has(id)) run.record(id, 'skip', interrupted ? 'interrupted' : 'not reached');
  const results = CHECK_IDS.map((id) => run.results.get(id)!);
  return {
    upstreamUrl: run.opts.upstreamUrl,
    model: run.model,
    results,
    ok: !interrupted && results.every((r) => r.outcome !== 'fail'),
    interrupted,
    streamId: run.streamId,
    streamDeleted: run.streamId === undefined ? undefined : run.deleted,
    completions: run.completions,
    estimate: run.estimate,
    spentMicrocents: run.spent,
    balanceBeforeMicrocents: run.balanceBefore,
    balanceAfterMicrocents: run.balanceAfter,
  };
}

/** Deletes the stream if the run did not get to (failure, abort), then reads the balance again. */
async function cleanUp(run: RunContext): Promise<void> {
  await run.stopPublisher();
  if (run.streamId && !run.deleted) {
    run.progress(`deleting stream ${run.streamId}`);
    try {
      // No signal: an interrupted run must still delete its stream.
      await run.client.deleteStream(run.key, run.streamId);
      run.deleted = true;
    } catch (err) {
      run.progress(
        `could not delete stream ${run.streamId}: ${errorText(err)} (its lease ends it within ${describe(run.created?.ttl_seconds)} s)`,
      );
    }
  }
  if (run.streamId && run.deleted) run.progress(`stream ${run.streamId} deleted`);
  if (!run.signal?.aborted && run.balanceBefore !== undefined) {
    run.balanceAfter = await run.client.balance(run.key).then(
      (b) => (typeof b.balance_microcents === 'number' ? b.balance_microcents : undefined),
      () => undefined,
    );
  }
  await run.client.close();
}

/** `frames.first`: the wait for the stream's first frames, with a test pattern published when needed. */
import { createLogger } from '../lib/logger';
import type { CreateStreamResponse, Stream } from '../upstream/client';
import { sleep } from '../upstream/retry';
import { CLIP_MS } from './cost';
import { publishTestPattern } from './publish';
import type { PublishMode } from './run';
import type { RunContext } from './run-context';
import { describe, problem, shapeProblems } from './shapes';
import { errorText } from './verdicts';

/** The gateway's first-frame poll interval (`legacy.firstFramePollMs` default). */
const POLL_MS = 250;

/**
 * Waits for the first frame and a full clip (what the gateway's scheduler waits for), publishing
 * a test pattern itself when the mode says so. Undefined: no frames (checked as `frames.first`).
 */
export async function firstFrames(run: RunContext, id: string, created: CreateStreamResponse | undefined): Promise<Stream | undefined> {
  const mode = run.opts.publish ?? 'auto';
  const started = Date.now();
  const deadline = started + (run.opts.frameTimeoutMs ?? 30_000);
  const publishAt = mode === 'always' ? started : mode === 'auto' ? started + (run.opts.autoPublishAfterMs ?? 5000) : Infinity;
  let publishError: string | undefined;
  let first: Stream | undefined;
  let firstAfterMs = 0;
  run.progress(mode === 'always' ? 'publishing a test pattern; waiting for the first frame' : 'waiting for the first frame');
  for (;;) {
    run.checkAborted();
    const s = await readActive(run, id);
    if (!s) return undefined;
    if (s.last_frame_at_ms !== null && s.last_frame_at_ms !== undefined && !first) {
      first = s;
      firstAfterMs = Date.now() - started;
    }
    const now = Date.now();
    if (first && (typeof s.stream_time_ms !== 'number' || s.stream_time_ms >= CLIP_MS || now >= deadline)) {
      return framesVerdict(run, s, firstAfterMs) ? s : undefined;
    }
    if (!first && now >= deadline) {
      noFrames(run, Math.round((now - started) / 1000), publishError, mode);
      return undefined;
    }
    if (!first && now >= publishAt && !run.publisher && publishError === undefined) publishError = await publish(run, created);
    await sleep(POLL_MS, run.signal).catch(() => undefined);
  }
}

/** The stream while it is active; undefined (`frames.first` failed) when it cannot be read or has ended. */
async function readActive(run: RunContext, id: string): Promise<Stream | undefined> {
  let s: Stream;
  try {
    s = await run.client.getStream(run.key, id, run.call);
  } catch (err) {
    run.checkAborted();
    run.record('frames.first', 'fail', `reading the stream: ${errorText(err)}`);
    return undefined;
  }
  if (s.state !== 'active') {
    run.record('frames.first', 'fail', `the stream ended while waiting (end_reason ${describe(s.end_reason)})`);
    return undefined;
  }
  return s;
}

/** `frames.first` on the stream once its frames came: the frame fields' shapes and order. */
function framesVerdict(run: RunContext, s: Stream, firstAfterMs: number): boolean {
  const source = run.publisher ? `published by the kit (${run.publisher.framesPublished} frames sent)` : "the upstream's own publisher";
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
  return run.verdict('frames.first', problems, `after ${firstAfterMs} ms, ${source}; last_frame_index ${s.last_frame_index}`);
}

/** No frame by the deadline: a failure when the kit published, else a skip saying why nothing was published. */
function noFrames(run: RunContext, waitedS: number, publishError: string | undefined, mode: PublishMode): void {
  if (run.publisher)
    run.record(
      'frames.first',
      'fail',
      `the kit published ${run.publisher.framesPublished} frames into the room, but no frame was reported within ${waitedS} s`,
    );
  else
    run.record(
      'frames.first',
      'skip',
      `no frame within ${waitedS} s and no publisher: ${publishError ?? `publishing is off (--publish ${mode})`}`,
    );
}

/** Starts the kit's test pattern in the stream's room (`run.publisher`); why it could not, if it could not. */
async function publish(run: RunContext, created: CreateStreamResponse | undefined): Promise<string | undefined> {
  if (!created) return 'the create response has no usable publish url and token';
  run.progress(`publishing a test pattern into ${created.publish.url}`);
  try {
    run.publisher = await publishTestPattern(created.publish.url, created.publish.token, run.opts.logger ?? createLogger('silent'));
    return undefined;
  } catch (err) {
    const publishError = `could not publish into the room: ${errorText(err)}`;
    run.progress(publishError);
    return publishError;
  }
}

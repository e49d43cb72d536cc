/**
 * A test pattern published into a stream's media room, for upstreams that have no publisher of
 * their own (the provider): the gateway's own room publisher (`UpstreamPublisher`, rtc-node) fed
 * with generated frames, run in a media worker process (`src/gateway/ingest/media-worker.ts`), as
 * the gateway runs every native media object: the kit's own process loads no media library.
 */
import type { Logger } from '../lib/logger';
import { MediaWorkerProcess } from '../gateway/ingest/worker-process';

export interface TestPattern {
  /** Frames handed to the encoder so far (as the worker last reported). */
  readonly framesPublished: number;
  stop(): Promise<void>;
}

const PATTERN_ID = 'conformance-test-pattern';

/**
 * Joins the room with the publish token and publishes frames until `stop()`; rejects when the join
 * fails. `workerScript`: the media worker to fork (default: beside its module, in dist/).
 */
export async function publishTestPattern(url: string, token: string, logger: Logger, workerScript?: string): Promise<TestPattern> {
  let frames = 0;
  const worker = new MediaWorkerProcess(
    { script: workerScript, init: { op: 'init', logLevel: logger.level === 'silent' ? 'silent' : 'warn' } },
    (e) => {
      if (e.op === 'stats') frames = e.streams.find((s) => s.streamId === PATTERN_ID)?.framesRelayed ?? frames;
    },
  );
  try {
    await worker.ready;
    await worker.pattern(PATTERN_ID, url, token);
  } catch (err) {
    await worker.close();
    throw err;
  }
  return {
    get framesPublished() {
      return frames;
    },
    async stop() {
      await worker.stop(PATTERN_ID).catch(() => undefined);
      await worker.close();
    },
  };
}

/**
 * A test pattern published into a stream's room with the relay's own room publisher (rtc-node),
 * for the conformance kit against upstreams that have no publisher of their own (the provider).
 * Runs in the media worker (./media-worker.ts), like every native media object.
 */
import type { Logger } from '../../lib/logger';
import type { RtcModule } from './natives';
import { UpstreamPublisher } from './publisher';

const WIDTH = 320;
const HEIGHT = 240;
const FPS = 5;

/** One I420 frame: a grey ramp with a bright bar that moves one step per frame. */
export function patternFrame(n: number, width = WIDTH, height = HEIGHT): Uint8Array {
  const ySize = width * height;
  const data = new Uint8Array(ySize + ySize / 2);
  const bar = (n * 8) % width;
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) data[y * width + x] = x >= bar && x < bar + 24 ? 235 : 16 + Math.floor((y / height) * 160);
  }
  data.fill(128, ySize);
  return data;
}

export interface TestPattern {
  /** Frames handed to the encoder so far. */
  readonly framesPublished: number;
  stop(): Promise<void>;
}

/** Joins the room with the publish token and publishes frames until `stop()`; rejects when the join fails. */
export async function publishTestPattern(rtc: RtcModule, url: string, token: string, logger: Logger): Promise<TestPattern> {
  const publisher = new UpstreamPublisher({ rtc, url, token, logger, trackName: 'conformance' });
  let n = 0;
  const timer = setInterval(() => publisher.push({ width: WIDTH, height: HEIGHT, data: patternFrame(n++) }), 1000 / FPS);
  try {
    await publisher.connect();
  } catch (err) {
    clearInterval(timer);
    await publisher.close();
    throw err;
  }
  return {
    get framesPublished() {
      return publisher.framesPublished;
    },
    async stop() {
      clearInterval(timer);
      await publisher.close();
    },
  };
}

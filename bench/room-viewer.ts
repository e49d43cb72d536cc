/**
 * The cost of one viewer in the emulator's media room. The emulator runs as a child process
 * (`dist/main.js emulator`; its CPU and RSS read from /proc, so only it counts); a stream is
 * published at a fixed rate, first with no viewer, then with one viewer (rtc-node in this process,
 * joined with the stream's viewer token) subscribed, and the frame delay publisher → viewer is
 * matched by pattern index. Two publishers:
 *
 * - native: rtc-node in this process captures pattern frames (its capture time per index is known);
 * - synthetic: the stream's own test pattern, started through the control API. Its frame n is due
 *   at the first frame's time + n / fps (the publisher is anchored to its start), so that is the
 *   capture time a delay is counted from; the printed `skipped` says whether the anchor held.
 *
 * Knobs: BENCH_ROOM_WIDTH (640), BENCH_ROOM_HEIGHT (480), BENCH_ROOM_FPS (15), BENCH_ROOM_SECONDS (10).
 */
import { execFileSync } from 'node:child_process';
import * as rtc from '@livekit/rtc-node';
import type { Config } from '../src/config';
import { PatternRenderer } from '../src/emulator/frames/pattern';
import { emulatorChild, measure, patternOf, summary, waitUntil } from './util';

const WIDTH = Number(process.env.BENCH_ROOM_WIDTH ?? 640);
const HEIGHT = Number(process.env.BENCH_ROOM_HEIGHT ?? 480);
const FPS = Number(process.env.BENCH_ROOM_FPS ?? 15);
const SECONDS = Number(process.env.BENCH_ROOM_SECONDS ?? 10);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const mib = (kb: number) => `${(kb / 1024).toFixed(1)} MiB`;

/** An rtc-node publisher capturing pattern frames 0, 1, 2 … at FPS, noting when it captured each. */
class NativePublisher {
  readonly room = new rtc.Room();
  readonly capturedAt = new Map<number, number>();
  private readonly source = new rtc.VideoSource(WIDTH, HEIGHT);
  private readonly renderer = new PatternRenderer(WIDTH, HEIGHT);
  private timer: NodeJS.Timeout | undefined;
  private next = 0;

  async start(publish: { url: string; token: string }): Promise<void> {
    await this.room.connect(publish.url, publish.token, { autoSubscribe: false, dynacast: false });
    const track = rtc.LocalVideoTrack.createVideoTrack('camera', this.source);
    await this.room.localParticipant!.publishTrack(
      track,
      new rtc.TrackPublishOptions({ source: rtc.TrackSource.SOURCE_CAMERA, simulcast: false }),
    );
    this.timer = setInterval(() => {
      const index = this.next++;
      const data = this.renderer.renderI420(index);
      this.capturedAt.set(index, Date.now());
      this.source.captureFrame(new rtc.VideoFrame(data, WIDTH, HEIGHT, rtc.VideoBufferType.I420));
    }, 1000 / FPS);
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.room.disconnect().catch(() => undefined);
    await this.source.close().catch(() => undefined);
  }
}

/** A stock rtc-node viewer: counts frames and notes when each pattern index arrived. */
class Viewer {
  readonly room = new rtc.Room();
  frames = 0;
  size = '-';
  readonly arrivedAt = new Map<number, number>();
  private reader: ReadableStreamDefaultReader<rtc.VideoFrameEvent> | undefined;

  constructor() {
    this.room.on(rtc.RoomEvent.TrackSubscribed, (track) => {
      if (track.kind !== rtc.TrackKind.KIND_VIDEO) return;
      const reader = new rtc.VideoStream(track).getReader();
      this.reader = reader;
      void (async () => {
        for (;;) {
          const next = await reader.read().catch(() => ({ done: true as const, value: undefined }));
          if (next.done || !next.value) return;
          const at = Date.now();
          const frame = next.value.frame.convert(rtc.VideoBufferType.I420);
          this.frames += 1;
          this.size = `${frame.width}x${frame.height}`;
          const index = patternOf({ width: frame.width, height: frame.height, format: 'i420', data: frame.data });
          if (index !== null && !this.arrivedAt.has(index)) this.arrivedAt.set(index, at);
        }
      })();
    });
  }

  async connect(view: { url: string; token: string }): Promise<void> {
    await this.room.connect(view.url, view.token, { autoSubscribe: true, dynacast: false });
  }

  /** Delays (ms) of the frames that arrived after `since`, given each index's capture time. */
  delays(since: number, capturedAt: (index: number) => number | undefined): number[] {
    const out: number[] = [];
    for (const [index, at] of this.arrivedAt) {
      const captured = capturedAt(index);
      if (at >= since && captured !== undefined) out.push(at - captured);
    }
    return out;
  }

  async close(): Promise<void> {
    await this.reader?.cancel().catch(() => undefined);
    await this.room.disconnect().catch(() => undefined);
  }
}

interface Api {
  url: string;
  key: string;
}

async function call<T>(api: Api, method: string, path: string, body?: unknown): Promise<T> {
  const res = await fetch(`${api.url}${path}`, {
    method,
    headers: { 'content-type': 'application/json', authorization: `Bearer ${api.key}` },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!res.ok) throw new Error(`${method} ${path} answered ${res.status}: ${await res.text()}`);
  return (await res.json()) as T;
}

interface StreamView {
  first_frame_at_ms: number | null;
  last_frame_at_ms: number | null;
  last_frame_index: number | null;
}

/**
 * One publisher: the emulator's CPU without and with one viewer, the viewer's fps and the delay.
 * `capturedAt` maps a pattern index to its capture time (read after the viewer's window).
 */
async function viewerCost(
  label: string,
  api: Api,
  pid: number,
  ticks: number,
  streamId: string,
  capturedAt: () => Promise<(index: number) => number | undefined>,
): Promise<void> {
  // The publication settles (bitrate ramp, first frames) before anything is measured.
  await sleep(3000);
  const alone = await measure(pid, ticks, SECONDS);
  const viewer = new Viewer();
  try {
    const { view } = await call<{ view: { url: string; token: string } }>(api, 'POST', `/v1beta/streams/${streamId}/viewer-token`);
    await viewer.connect(view);
    if (!(await waitUntil(() => viewer.frames > 0, 20_000))) throw new Error(`${label}: the viewer got no frame`);
    await sleep(2000);
    const since = Date.now();
    const frames0 = viewer.frames;
    const watched = await measure(pid, ticks, SECONDS);
    const fps = (viewer.frames - frames0) / ((Date.now() - since) / 1000);
    const delays = viewer.delays(since, await capturedAt());
    console.log(
      `${label.padEnd(28)} emulator CPU ${alone.cpuPct.toFixed(1).padStart(5)} % of a core without a viewer, ` +
        `${watched.cpuPct.toFixed(1).padStart(5)} % with one (+${(watched.cpuPct - alone.cpuPct).toFixed(1)}); ` +
        `RSS ${mib(alone.rssKb)} → ${mib(watched.rssKb)}`,
    );
    console.log(`${''.padEnd(28)} viewer ${fps.toFixed(1)} fps at ${viewer.size}; delay publisher → viewer ms: ${summary(delays, 1)}`);
  } finally {
    await viewer.close();
  }
}

export async function benchRoomViewer(cfg: Config): Promise<void> {
  const ticks = Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100;
  const { child: emulator, url } = await emulatorChild({ NODE_ENV: 'production' });
  const api: Api = { url, key: `${cfg.brand}-local-dev` };
  console.log(
    `${WIDTH}x${HEIGHT} at ${FPS} fps, ${SECONDS} s windows; emulator = a child process (dist/main.js emulator), publisher and viewer rtc-node in this one`,
  );
  try {
    const pid = emulator.proc.pid!;
    const idle = await measure(pid, ticks, 3);
    console.log(`${'idle emulator'.padEnd(28)} emulator CPU ${idle.cpuPct.toFixed(1).padStart(5)} % of a core; RSS ${mib(idle.rssKb)}`);

    // (a) A native publisher (rtc-node): the room decodes it; a viewer adds a VP8 encode.
    const native = await call<{ id: string; publish: { url: string; token: string } }>(api, 'POST', '/v1beta/streams', {});
    const publisher = new NativePublisher();
    try {
      await publisher.start(native.publish);
      await viewerCost(`native ${WIDTH}x${HEIGHT}@${FPS}`, api, pid, ticks, native.id, async () => (i) => publisher.capturedAt.get(i));
    } finally {
      await publisher.close();
      await call(api, 'DELETE', `/v1beta/streams/${native.id}`).catch(() => undefined);
    }

    // (b) The synthetic test pattern: rendered into the buffer; for a viewer also as I420, encoded.
    const synthetic = await call<{ id: string }>(api, 'POST', '/v1beta/streams', {});
    try {
      await call(api, 'POST', `/_emulator/streams/${synthetic.id}/publisher`, { fps: FPS, width: WIDTH, height: HEIGHT });
      let skipped = 0;
      await viewerCost(`synthetic ${WIDTH}x${HEIGHT}@${FPS}`, api, pid, ticks, synthetic.id, async () => {
        const s = await call<StreamView>(api, 'GET', `/v1beta/streams/${synthetic.id}`);
        const first = s.first_frame_at_ms ?? 0;
        skipped = Math.round((((s.last_frame_at_ms ?? first) - first) * FPS) / 1000) - (s.last_frame_index ?? 0);
        return (i) => first + (i * 1000) / FPS;
      });
      console.log(`${''.padEnd(28)} (capture time = first frame + index / fps; frames the publisher skipped so far: ${skipped})`);
    } finally {
      await call(api, 'DELETE', `/v1beta/streams/${synthetic.id}`).catch(() => undefined);
    }
  } finally {
    await emulator.kill();
    await rtc.dispose();
  }
}

/**
 * Emulator benchmarks: (a) stream-reference resolution, (b) a full chat completion over HTTP with the
 * built-in model, both on a stream holding frames at 10 fps. Each prints p50/p99 latency and ops/s
 * and returns the figures.
 */
import path from 'node:path';
import sharp from 'sharp';
import { loadConfig } from '../src/config';
import { FrameBuffer } from '../src/emulator/frames/buffer';
import { renderPatternRgb } from '../src/emulator/frames/pattern';
import { parseReference, resolveImage, resolveVideo } from '../src/emulator/references';
import type { ImageReference, VideoReference } from '../src/emulator/references';
import { startEmulator } from '../src/emulator/server';
import type { EmulatedStream } from '../src/emulator/streams';
import { createLogger } from '../src/lib/logger';
import { ROOT, quantile } from '../test/helpers/util';

export interface BenchFigures {
  name: string;
  ops: number;
  p50Ms: number;
  p99Ms: number;
  opsPerSec: number;
}

function summarise(name: string, samplesNs: bigint[], wallNs: bigint): BenchFigures {
  const ms = samplesNs.map((n) => Number(n) / 1e6);
  const fig = { name, ops: ms.length, p50Ms: quantile(ms, 0.5), p99Ms: quantile(ms, 0.99), opsPerSec: ms.length / (Number(wallNs) / 1e9) };
  console.log(
    `${name.padEnd(52)} n=${String(fig.ops).padStart(6)}  p50=${fig.p50Ms.toFixed(3)} ms  p99=${fig.p99Ms.toFixed(3)} ms  ${fig.opsPerSec.toFixed(0)} ops/s`,
  );
  return fig;
}

async function measure(name: string, ops: number, fn: () => unknown): Promise<BenchFigures> {
  const samples: bigint[] = [];
  const start = process.hrtime.bigint();
  for (let i = 0; i < ops; i++) {
    const t = process.hrtime.bigint();
    await fn();
    samples.push(process.hrtime.bigint() - t);
  }
  return summarise(name, samples, process.hrtime.bigint() - start);
}

/** Ingests `n` pattern frames at `fps`, the last one captured now. */
async function fill(frames: FrameBuffer, n: number, fps: number, width: number, height: number): Promise<void> {
  const end = Date.now();
  for (let i = 0; i < n; i++) {
    const raw = { width, height, format: 'rgb' as const, data: renderPatternRgb(frames.nextIndex, width, height) };
    void frames.ingest(raw, Math.round(end - ((n - 1 - i) * 1000) / fps));
  }
  await frames.drain();
}

const STREAM_ID = '6b0f3a8e-1c2d-4e5f-8a9b-0c1d2e3f4a5b';

/** (a) Parse + resolve references on a 5-minute buffer at 10 fps (3000 frames). */
export async function benchReferences(ops = 20_000): Promise<BenchFigures[]> {
  const buf = new FrameBuffer({ retentionMs: 600_000, maxBytes: 1 << 30, storeWidth: 32, jpegQuality: 50, fpsWindowMs: 5000 });
  await fill(buf, 3000, 10, 16, 12);
  // A fixed "request time" just after the last frame, so offsets resolve the same on every run.
  const now = (buf.lastFrameAtMs ?? Date.now()) + 20;
  const url = (q: string) => `svc://streams/${STREAM_ID}?${q}`;
  const parse = <T>(q: string, kind: 'image' | 'video'): T => {
    const r = parseReference(url(q), kind, 'svc', ['url']);
    if (!r.ok) throw new Error(r.problems[0]!.msg);
    return r.value as T;
  };
  return [
    await measure('references: parse+resolve video -10 s @ max_fps=1', ops, () =>
      resolveVideo(parse<VideoReference>('start_offset_ms=-10000&max_fps=1', 'video'), buf, now),
    ),
    await measure('references: parse+resolve video whole buffer @ 1 fps', ops / 10, () =>
      resolveVideo(parse<VideoReference>('start_offset_ms=0&max_fps=1', 'video'), buf, now),
    ),
    await measure('references: parse+resolve image frame_index=-1', ops, () =>
      resolveImage(parse<ImageReference>('frame_index=-1', 'image'), buf, now),
    ),
    await measure('references: parse+resolve image offset_ms=-1000', ops, () =>
      resolveImage(parse<ImageReference>('offset_ms=-1000&direction=backward', 'image'), buf, now),
    ),
  ];
}

/**
 * (b) Full completions over HTTP: a 10 s window at 1 fps on a stream holding 60 s of 320×240 frames
 * at 10 fps; and one inline `data:` JPEG of 640×480 (decoded, downscaled and analysed per request).
 */
export async function benchCompletion(ops = 200): Promise<BenchFigures[]> {
  // The shipped accounts and models, named from the repository root: compiled to dist-bench/, the
  // config module's own default-file path does not lead to config/default.json.
  const file = path.join(ROOT, 'config', 'default.json');
  const cfg = loadConfig({ env: {}, file, overrides: { logLevel: 'silent', emulator: { port: 0 } } });
  // The real emulator (routes, middleware, media room), as clients meet it.
  const emu = await startEmulator(cfg, createLogger('silent'));
  const { ctx } = emu.emulator;
  const streams = ctx.streams;
  const port = emu.port;
  const key = `${ctx.brand.keyPrefix}local-dev`;
  const stream: EmulatedStream = streams.create(ctx.accounts.authenticate(`Bearer ${key}`));
  await fill(stream.frames, 600, 10, 320, 240);

  /** One user message: a question and one media part. */
  const ask = (text: string, part: Record<string, unknown>) =>
    JSON.stringify({ model: 'local/analyzer', messages: [{ role: 'user', content: [{ type: 'text', text }, part] }] });
  const body = ask('Describe what happens in this clip.', {
    type: 'video_url',
    video_url: { url: `${ctx.brand.scheme}://streams/${stream.id}?start_offset_ms=-10000&max_fps=1` },
  });
  const jpeg = await sharp(Buffer.from(renderPatternRgb(7, 640, 480)), { raw: { width: 640, height: 480, channels: 3 } })
    .jpeg()
    .toBuffer();
  const imageBody = ask('What is in this picture?', {
    type: 'image_url',
    image_url: { url: `data:image/jpeg;base64,${jpeg.toString('base64')}` },
  });
  const post = (payload: string) => async () => {
    const res = await fetch(`http://127.0.0.1:${port}/v1beta/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
      body: payload,
    });
    if (res.status !== 200) throw new Error(`completion answered ${res.status}: ${await res.text()}`);
    await res.arrayBuffer();
  };
  const complete = post(body);
  try {
    const cold = await measure('completion: first call (frames decoded)', 1, complete);
    const warm = await measure('completion: -10 s @ max_fps=1 on 10 fps (10 frames)', ops, complete);
    const image = await measure(
      `completion: data: JPEG 640x480 (${Math.round(jpeg.length / 1024)} KiB)`,
      Math.max(1, ops / 4),
      post(imageBody),
    );
    return [cold, warm, image];
  } finally {
    await emu.close();
  }
}

if (require.main === module) {
  void (async () => {
    await benchReferences();
    await benchCompletion();
  })();
}

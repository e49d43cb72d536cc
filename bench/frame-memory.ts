/**
 * Memory of one emulator stream holding a full retention window: 600 s of 10 fps 640×480 frames
 * (6,000 frames), stored as the buffer stores them (downscaled JPEG). Prints stored bytes, bytes
 * per frame, and the process's heap/RSS growth.
 */
import type { Config } from '../src/config';
import { FrameBuffer } from '../src/emulator/frames/buffer';
import { PatternRenderer } from '../src/emulator/frames/pattern';

const mib = (b: number) => `${(b / 1024 / 1024).toFixed(1)} MiB`;

export async function benchFrameMemory(
  cfg: Config,
  opts: { seconds?: number; fps?: number; width?: number; height?: number } = {},
): Promise<void> {
  const seconds = opts.seconds ?? cfg.emulator.frameRetentionSeconds;
  const fps = opts.fps ?? 10;
  const width = opts.width ?? 640;
  const height = opts.height ?? 480;
  const n = Math.round(seconds * fps);
  const t0 = Date.now();
  // A clock that follows the frames' capture times, so nothing ages out during the fill.
  let now = t0;
  const buffer = new FrameBuffer({
    retentionMs: cfg.emulator.frameRetentionSeconds * 1000,
    maxBytes: cfg.emulator.maxFrameBytesPerStream,
    storeWidth: cfg.emulator.frameStoreWidth,
    jpegQuality: cfg.emulator.jpegQuality,
    fpsWindowMs: cfg.emulator.fpsWindowMs,
    now: () => now,
  });
  const renderer = new PatternRenderer(width, height);
  global.gc?.();
  const before = process.memoryUsage();
  const started = performance.now();
  // I420, as frames arrive from the media room; a few in flight keeps both cores busy.
  const inFlight: Promise<unknown>[] = [];
  for (let i = 0; i < n; i++) {
    now = t0 + Math.round((i * 1000) / fps);
    inFlight.push(buffer.ingest({ width, height, format: 'i420', data: renderer.renderI420(i) }, now));
    if (inFlight.length >= 8) await inFlight.shift();
    if (i % 1000 === 999) process.stdout.write(`  ${i + 1}/${n} frames\r`);
  }
  await buffer.drain();
  const elapsed = performance.now() - started;
  global.gc?.();
  const after = process.memoryUsage();
  console.log(
    `stream of ${seconds} s × ${fps} fps × ${width}×${height} (${n} frames, stored ≤ ${cfg.emulator.frameStoreWidth} px wide, JPEG q${cfg.emulator.jpegQuality})`,
  );
  console.log(`  retained ${buffer.retainedCount} frames, evicted ${buffer.evictedCount}`);
  console.log(`  stored JPEG bytes        ${mib(buffer.storedBytes)} (${(buffer.storedBytes / n / 1024).toFixed(1)} KiB/frame)`);
  console.log(`  heap+external growth     ${mib(after.heapUsed + after.external - before.heapUsed - before.external)}`);
  console.log(`  RSS growth               ${mib(after.rss - before.rss)}`);
  console.log(`  ingest                   ${(elapsed / n).toFixed(2)} ms/frame (${((n * 1000) / elapsed).toFixed(0)} frames/s)`);
  buffer.clear();
}

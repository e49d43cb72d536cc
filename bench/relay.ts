/**
 * Legacy webrtc streams under load: 640×480, 30 fps in (Chromium's fake camera, or a canvas
 * painting the emulator's index pattern), created through a gateway in a child process against an
 * emulator in this process, in each `legacy.webrtc.mode`: over WHIP (the page publishes into the
 * emulator's room; the gateway carries no media) and through the relay (the gateway answers,
 * decodes and republishes).
 *
 * Reports the gateway's CPU and RSS (from /proc: the gateway process and its media worker, where
 * the relay runs, with the worker's share apart; the browser and emulator do not count) idle, with two
 * native streams, with one and two webrtc streams at target_fps 30 and one at target_fps 5; the
 * frames the browser sent against those the upstream stored; and the end-to-end delay from a frame
 * leaving the browser (painted on the canvas) to it being resolvable upstream (stored in the
 * emulator's frame buffer), matched by pattern index.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { build } from 'esbuild';
import { chromium } from 'playwright-core';
import type { Browser, Page } from 'playwright-core';
import type { Config } from '../src/config';
import { startEmulator } from '../src/emulator/server';
import type { EmulatedStream } from '../src/emulator/streams';
import { closeServer, listen } from '../src/lib/listen';
import { createLogger } from '../src/lib/logger';
import { syntheticOffer } from '../src/lib/sdp';
import type { SenderOptions } from './relay-page';
import { ROOT, freePort, quantile } from '../test/helpers/util';
import { child, MAIN, measure, patternOf, waitHealthy } from './util';
import type { Measured } from './util';

const PAGE_ENTRY = path.join(ROOT, 'bench', 'relay-page.ts');
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const WIDTH = 640;
const HEIGHT = 480;
const CAMERA_FPS = 30;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const mib = (kb: number) => `${(kb / 1024).toFixed(1)} MiB`;

/** What the emulator's buffer saw of one stream: frames stored, last size, when each pattern index became resolvable. */
interface Seen {
  frames: number;
  size: string;
  appearedAt: Map<number, number>;
}

/** Wraps a stream's buffer: counts stored frames and notes when each pattern index became readable. */
function watchBuffer(stream: EmulatedStream, seen: Map<string, Seen>): void {
  const entry: Seen = { frames: 0, size: '-', appearedAt: new Map() };
  seen.set(stream.id, entry);
  const buffer = stream.frames;
  const ingest = buffer.ingest.bind(buffer);
  buffer.ingest = (raw, capturedAtMs) => {
    const index = patternOf(raw);
    const stored = ingest(raw, capturedAtMs);
    void stored.then((frame) => {
      if (!frame) return;
      entry.frames += 1;
      entry.size = `${raw.width}x${raw.height}`;
      if (index !== null && !entry.appearedAt.has(index)) entry.appearedAt.set(index, Date.now());
    });
    return stored;
  };
}

function clipBody(targetFps: number) {
  // Inference every 30 s (the relay is what is measured), the small model, few tokens.
  return {
    mode: 'clip',
    processing: { target_fps: targetFps, clip_length_seconds: 1, delay_seconds: 30 },
    inference: { prompt: 'What happens?', model: 'local/analyzer-mini', max_output_tokens: 64 },
  };
}

async function serveSenderPage(): Promise<{ url: string; close(): Promise<void> }> {
  const bundle = await build({
    entryPoints: [PAGE_ENTRY],
    bundle: true,
    format: 'iife',
    platform: 'browser',
    target: 'chrome110',
    write: false,
    logLevel: 'silent',
  });
  const script = bundle.outputFiles[0]!.text;
  const server = http.createServer((req, res) => {
    if (req.url === '/relay.js') {
      res.writeHead(200, { 'content-type': 'text/javascript' }).end(script);
      return;
    }
    res
      .writeHead(200, { 'content-type': 'text/html' })
      .end('<!doctype html><html><head><link rel="icon" href="data:,"><script src="/relay.js"></script></head><body></body></html>');
  });
  const port = await listen(server, 0, '127.0.0.1');
  return { url: `http://127.0.0.1:${port}/`, close: () => closeServer(server) };
}

/**
 * The media path of legacy webrtc streams, per `legacy.webrtc.mode` (`BENCH_RELAY_MODES`, default
 * `whip,relay`), one gateway process each against the same in-process emulator and browser:
 * `whip` publishes the page's offer into the emulator's room (the media never reaches the
 * gateway), `relay` answers it in the gateway and republishes the frames.
 */
export async function benchRelay(cfg: Config): Promise<void> {
  if (!fs.existsSync(CHROMIUM)) {
    console.log(`skipped: no Chromium at ${CHROMIUM} (set CHROMIUM_PATH)`);
    return;
  }
  const modes = (process.env.BENCH_RELAY_MODES ?? 'whip,relay')
    .split(',')
    .map((m) => m.trim())
    .filter((m) => m === 'whip' || m === 'relay');
  const seen = new Map<string, Seen>();
  const emuCfg: Config = {
    ...cfg,
    logLevel: 'warn',
    emulator: {
      ...cfg.emulator,
      port: 0,
      host: '127.0.0.1',
      controlApi: true,
      autoPublish: { ...cfg.emulator.autoPublish, enabled: false },
    },
  };
  const emulator = await startEmulator(emuCfg, createLogger('warn', 'emulator'));
  emulator.emulator.ctx.streams.onCreate((s) => watchBuffer(s, seen));
  const pages = await serveSenderPage();
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--use-fake-device-for-media-stream=fps=30',
      '--use-fake-ui-for-media-stream',
      '--allow-loopback-in-peer-connection',
      '--disable-background-networking',
      '--disable-background-timer-throttling',
      '--disable-renderer-backgrounding',
    ],
  });
  try {
    for (const mode of modes) {
      console.log(`\n-- legacy.webrtc.mode ${mode} --`);
      await benchMode(mode, cfg, emulator.url, pages.url, browser, seen);
    }
    await benchDensity(cfg, emulator.url, Number(process.env.BENCH_RELAY_DENSITY ?? 400));
  } finally {
    await browser.close().catch(() => undefined);
    await pages.close();
    await emulator.close();
  }
}

async function benchMode(
  mode: string,
  cfg: Config,
  emulatorUrl: string,
  pageUrl: string,
  browser: Browser,
  seen: Map<string, Seen>,
): Promise<void> {
  const ticks = Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100;
  const key = `${cfg.brand}-local-dev`;
  const gwPort = await freePort();
  const gateway = child(MAIN, ['serve'], {
    UPSTREAM_URL: emulatorUrl,
    PORT: String(gwPort),
    HOST: '127.0.0.1',
    LOG_LEVEL: 'warn',
    TELEMETRY_REQUEST_LOG: 'false',
    NODE_ENV: 'production',
    LEGACY_WEBRTC_MODE: mode,
  });
  const gwUrl = `http://127.0.0.1:${gwPort}`;
  const open: Page[] = [];
  try {
    await waitHealthy(`${gwUrl}/healthz`);
    const pid = gateway.proc.pid!;
    const start = async (targetFps: number, source: SenderOptions['source']): Promise<{ page: Page; streamId: string }> => {
      const page = await browser.newPage();
      open.push(page);
      await page.goto(pageUrl);
      const opts: SenderOptions = { source, width: WIDTH, height: HEIGHT, fps: CAMERA_FPS };
      const r = await page.evaluate(([gw, k, body, o]) => window.relayBench.start(gw, k, body, o), [
        gwUrl,
        key,
        clipBody(targetFps),
        opts,
      ] as const);
      if (r.status !== 201 || !r.streamId) throw new Error(`legacy create failed: ${r.status} ${r.error ?? ''}`);
      return { page, streamId: r.streamId };
    };
    const stop = async (s: { page: Page; streamId: string }) => {
      await fetch(`${gwUrl}/v0.2/streams/${s.streamId}`, { method: 'DELETE', headers: { authorization: `Bearer ${key}` } });
      await s.page.evaluate(() => window.relayBench.stop()).catch(() => undefined);
      await s.page.close();
    };
    /** Frames per second the browser sent and the upstream stored, per stream, over `seconds`. */
    const fpsOf = async (streams: { page: Page; streamId: string }[], seconds: number) => {
      const out0 = await Promise.all(streams.map((s) => s.page.evaluate(() => window.relayBench.outbound())));
      const before = streams.map((s) => seen.get(s.streamId)?.frames ?? 0);
      await sleep(seconds * 1000);
      const out1 = await Promise.all(streams.map((s) => s.page.evaluate(() => window.relayBench.outbound())));
      return streams
        .map((s, i) => {
          const sent = (out1[i]!.framesSent - out0[i]!.framesSent) / seconds;
          const stored = ((seen.get(s.streamId)?.frames ?? 0) - before[i]!) / seconds;
          const limited = out1[i]!.limitation === 'none' ? '' : `, browser limited by ${out1[i]!.limitation}`;
          const share = sent > 0 ? ` (${((stored / sent) * 100).toFixed(0)} %)` : '';
          return `browser sent ${sent.toFixed(1)} fps at ${out1[i]!.size} → upstream ${stored.toFixed(1)} fps${share} at ${seen.get(s.streamId)?.size}${limited}`;
        })
        .join('; ');
    };
    // The gateway's figures count its media worker in (the relay runs there); the worker's share is shown apart.
    const line = (label: string, m: Measured, extra: string) =>
      console.log(
        `${label.padEnd(44)} gateway CPU ${m.cpuPct.toFixed(1).padStart(5)} % of a core (worker ${m.children.cpuPct.toFixed(1).padStart(4)})` +
          `   RSS ${mib(m.rssKb).padStart(9)} (worker ${mib(m.children.rssKb).padStart(9)})   ${extra}`,
      );

    // The boot's own work (JIT, first GCs) settles before anything is measured.
    await sleep(5000);
    const idle = await measure(pid, ticks, 4);
    line('idle (no stream)', idle, '');

    // Native streams for comparison: the same streams with no media at all (nothing publishes).
    const natives: string[] = [];
    for (let i = 0; i < 2; i++) {
      const res = await fetch(`${gwUrl}/v0.2/streams`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify(clipBody(30)),
      });
      natives.push(((await res.json()) as { stream_id: string }).stream_id);
    }
    await sleep(2000);
    const native = await measure(pid, ticks, 4);
    line('2 native streams (nothing published)', native, '');
    for (const id of natives) await fetch(`${gwUrl}/v0.2/streams/${id}`, { method: 'DELETE', headers: { authorization: `Bearer ${key}` } });
    await sleep(1000);

    // One, then two camera streams at target_fps 30 (every camera frame relayed).
    const a = await start(30, 'camera');
    await sleep(4000);
    const fpsA = await fpsOf([a], 2);
    const one = await measure(pid, ticks, 8);
    line('1 stream, camera 640x480@30 → target 30', one, fpsA);
    const b = await start(30, 'camera');
    await sleep(4000);
    const two = await measure(pid, ticks, 8);
    const fpsAB = await fpsOf([a, b], 2);
    line('2 streams, camera → target 30', two, fpsAB);
    await stop(a);
    await stop(b);
    await sleep(1500);

    // The usual legacy clip rate: the relay forwards 5 of the camera's 30 frames a second.
    const c = await start(5, 'camera');
    await sleep(4000);
    const fpsC = await fpsOf([c], 2);
    const low = await measure(pid, ticks, 8);
    line('1 stream, camera 640x480@30 → target 5', low, fpsC);
    await stop(c);
    await sleep(1500);

    // End-to-end delay: canvas pattern painted at 30 fps, relayed at 30, matched by index.
    const d = await start(30, 'pattern');
    await sleep(3000);
    await d.page.evaluate(() => window.relayBench.drainSent());
    const patternCpu = measure(pid, ticks, 10);
    await sleep(10_500);
    const sent = await d.page.evaluate(() => window.relayBench.drainSent());
    const appeared = seen.get(d.streamId)?.appearedAt ?? new Map<number, number>();
    const delays: number[] = [];
    for (const [index, at] of sent) {
      const t = appeared.get(index);
      if (t !== undefined) delays.push(t - at);
    }
    const pc = await patternCpu;
    line('1 stream, pattern canvas 640x480@30 → 30', pc, await fpsOf([d], 2));
    const q = (p: number) => quantile(delays, p).toFixed(0);
    console.log(
      `end-to-end delay, browser paint → resolvable upstream: p50 ${q(0.5)} ms  p90 ${q(0.9)} ms  p99 ${q(0.99)} ms  max ${Math.max(...delays).toFixed(0)} ms` +
        `  (${delays.length} of ${sent.length} painted frames matched)`,
    );
    await stop(d);

    console.log(
      `${mode}: per webrtc stream (640x480, 30 fps in): ${(one.cpuPct - idle.cpuPct).toFixed(1)} % of a core at target 30 ` +
        `(second stream ${(two.cpuPct - one.cpuPct).toFixed(1)} %), ${(low.cpuPct - idle.cpuPct).toFixed(1)} % at target 5; ` +
        `RSS +${mib(one.rssKb - idle.rssKb)} for the first stream${mode === 'relay' ? ' (loads rtc-node + wrtc)' : ''}, ` +
        `+${mib(two.rssKb - one.rssKb)} for the second; two native streams +${mib(native.rssKb - idle.rssKb)}`,
    );
  } finally {
    for (const p of open) await p.close().catch(() => undefined);
    await gateway.kill();
  }
}

/**
 * What a webrtc stream over WHIP costs the gateway beside a native one, at `n` streams of each on a
 * fresh gateway: RSS and CPU per stream. The WHIP offers are synthetic (the room answers, nothing
 * ever connects), so neither kind has frames: both wait for a first frame, and a WHIP stream also
 * reads the upstream stream every `legacy.webrtc.frameCheckMs` for its frames.
 */
async function benchDensity(cfg: Config, emulatorUrl: string, n: number): Promise<void> {
  if (!(n > 0)) return;
  const ticks = Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100;
  const key = `${cfg.brand}-local-dev`;
  const configFile = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'relay-bench-')), 'config.json');
  // Room for n streams on one key; no stream ends for want of a first frame while it is measured.
  fs.writeFileSync(
    configFile,
    JSON.stringify({
      legacy: {
        maxStreamsPerKey: n + 1,
        webrtc: { firstFrameTimeoutMs: 600_000 },
      },
    }),
  );
  console.log(`\n-- ${n} streams of each kind, nothing published (gateway RSS and CPU per stream) --`);
  for (const kind of ['native', 'whip'] as const) {
    const port = await freePort();
    const gateway = child(MAIN, ['serve', '--config', configFile], {
      UPSTREAM_URL: emulatorUrl,
      PORT: String(port),
      HOST: '127.0.0.1',
      LOG_LEVEL: 'warn',
      TELEMETRY_REQUEST_LOG: 'false',
      NODE_ENV: 'production',
    });
    const url = `http://127.0.0.1:${port}`;
    const ids: string[] = [];
    try {
      await waitHealthy(`${url}/healthz`);
      await sleep(5000);
      const pid = gateway.proc.pid!;
      const idle = await measure(pid, ticks, 4);
      for (let i = 0; i < n; i++) {
        const body = { ...clipBody(30), mode: 'frame', processing: { interval_seconds: 60 } };
        const res = await fetch(`${url}/v0.2/streams`, {
          method: 'POST',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
          body: JSON.stringify(kind === 'whip' ? { ...body, source: { type: 'webrtc', sdp: syntheticOffer() } } : body),
        });
        if (res.status !== 201) throw new Error(`${kind} create ${i}: ${res.status} ${await res.text()}`);
        ids.push(((await res.json()) as { stream_id: string }).stream_id);
      }
      await sleep(3000);
      const loaded = await measure(pid, ticks, 6);
      console.log(
        `${String(n).padStart(4)} ${kind.padEnd(6)} streams: RSS +${((loaded.rssKb - idle.rssKb) / n).toFixed(1)} KiB per stream ` +
          `(idle ${mib(idle.rssKb)} → ${mib(loaded.rssKb)}), CPU +${((loaded.cpuPct - idle.cpuPct) / n).toFixed(3)} % of a core per stream ` +
          `(${idle.cpuPct.toFixed(1)} → ${loaded.cpuPct.toFixed(1)} %)`,
      );
    } finally {
      for (const id of ids)
        await fetch(`${url}/v0.2/streams/${id}`, { method: 'DELETE', headers: { authorization: `Bearer ${key}` } }).catch(() => undefined);
      await gateway.kill();
    }
  }
}

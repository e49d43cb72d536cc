/**
 * The cadence a legacy customer asked for, at a hosted model's latency: the emulator (a child
 * process) answers like one (log-normal, median 700 ms, p99 2.8 s, +20 ms per frame; seeded), and
 * a gateway in this process runs `BENCH_CADENCE_STREAMS` (12) frame streams at 1 s and as many clip
 * streams (1 s clips at 2 fps, every 1 s), one results socket each, for `BENCH_CADENCE_SECONDS`
 * (30 s), once per `legacy.maxInFlight` in `BENCH_CADENCE_IN_FLIGHT` (`1,3`). Reports results
 * delivered ÷ ticks due, ticks skipped, results out of tick order (none may be), the most
 * completions of one stream in flight at once, and the delay from a tick being due to its result.
 */
import type { Config } from '../src/config';
import { startGateway } from '../src/gateway/server';
import { createLogger } from '../src/lib/logger';
import { tickNumbers } from '../test/helpers/fleet';
import { openResults } from '../test/helpers/results-socket';
import type { ResultsSocket } from '../test/helpers/results-socket';
import { quantile } from '../test/helpers/util';
import { emulatorChild } from './util';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const LATENCY = {
  EMULATOR_MODEL_LATENCY_MEDIAN_MS: '700',
  EMULATOR_MODEL_LATENCY_P99_MS: '2800',
  EMULATOR_MODEL_LATENCY_PER_FRAME_MS: '20',
};

export async function benchCadence(cfg: Config): Promise<void> {
  const perKind = Number(process.env.BENCH_CADENCE_STREAMS ?? 12);
  const seconds = Number(process.env.BENCH_CADENCE_SECONDS ?? 30);
  const inFlight = (process.env.BENCH_CADENCE_IN_FLIGHT ?? '1,3').split(',').map(Number);
  console.log(
    `\n== cadence: ${perKind} frame + ${perKind} clip streams at 1 s, ${seconds} s, upstream median 700 ms / p99 2.8 s (+20 ms a frame) ==`,
  );
  for (const maxInFlight of inFlight) await run(cfg, maxInFlight, perKind, seconds);
}

async function run(cfg: Config, maxInFlight: number, perKind: number, seconds: number): Promise<void> {
  const key = `${cfg.brand}-local-dev`;
  // The same seed every run: each maxInFlight meets the same sequence of answer times.
  const { child: emulator, url: emuUrl } = await emulatorChild({ EMULATOR_MODEL_LATENCY_SEED: '42', ...LATENCY });
  const inFlightNow = new Map<string, number>();
  let maxSeen = 0;
  let skipped = 0;
  const gw = await startGateway(
    { ...cfg, port: 0, host: '127.0.0.1', logLevel: 'warn', legacy: { ...cfg.legacy, maxInFlight, maxStreamsPerKey: 2 * perKind } },
    createLogger('warn'),
    emuUrl,
    { observer: { tickSkipped: () => void skipped++ } },
  );
  // Completions in flight per stream, read from the upstream calls the gateway makes.
  const upstream = gw.gateway.upstream;
  const complete = upstream.chatCompletion.bind(upstream);
  upstream.chatCompletion = async (...args: Parameters<typeof complete>) => {
    const ref = JSON.stringify(args[1]).match(/streams\/([0-9a-f-]{36})/)?.[1] ?? '?';
    const n = (inFlightNow.get(ref) ?? 0) + 1;
    inFlightNow.set(ref, n);
    maxSeen = Math.max(maxSeen, n);
    try {
      return await complete(...args);
    } finally {
      inFlightNow.set(ref, (inFlightNow.get(ref) ?? 1) - 1);
    }
  };
  const sockets: { kind: string; socket: ResultsSocket }[] = [];
  try {
    const bodies = {
      frame: {
        mode: 'frame',
        processing: { interval_seconds: 1 },
        inference: { prompt: 'What happens?', model: 'local/analyzer-mini', max_output_tokens: 64 },
      },
      clip: {
        mode: 'clip',
        processing: { target_fps: 2, clip_length_seconds: 1, delay_seconds: 1 },
        inference: { prompt: 'What happens?', model: 'local/analyzer-mini', max_output_tokens: 64 },
      },
    };
    for (const kind of ['frame', 'clip'] as const) {
      for (let i = 0; i < perKind; i++) {
        const res = await fetch(`${gw.url}/v0.2/streams`, {
          method: 'POST',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
          body: JSON.stringify(bodies[kind]),
        });
        const id = ((await res.json()) as { stream_id: string }).stream_id;
        await fetch(`${emuUrl}/_emulator/streams/${id}/publisher`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ fps: 5, width: 64, height: 48 }),
        });
        sockets.push({ kind, socket: await openResults(gw.url, id, key, { waitMs: null }) });
      }
    }
    // Every stream ticking (a clip stream waits for a full clip), then a window of `seconds`.
    await sleep(4000);
    const from = Date.now();
    skipped = 0;
    await sleep(seconds * 1000);
    const to = Date.now();
    for (const kind of ['frame', 'clip']) {
      const mine = sockets.filter((s) => s.kind === kind);
      let delivered = 0;
      let failed = 0;
      let outOfOrder = 0;
      const waits: number[] = [];
      for (const { socket } of mine) {
        const inWindow = socket.received.filter((r) => r.atMs >= from && r.atMs < to && r.message.ok !== undefined);
        delivered += inWindow.length;
        failed += inWindow.filter((r) => r.message.ok === false).length;
        const ticks = tickNumbers(
          socket.received.map((r) => r.id),
          socket.streamId,
          10_000,
        );
        for (let i = 1; i < ticks.length; i++) if (ticks[i]! <= ticks[i - 1]!) outOfOrder++;
        for (const r of inWindow) waits.push(Number(r.message.total_latency_ms));
      }
      const due = (mine.length * (to - from)) / 1000;
      const q = (p: number) => quantile(waits, p).toFixed(0);
      console.log(
        `maxInFlight ${maxInFlight}, ${kind.padEnd(5)}: delivered ÷ due ${(delivered / due).toFixed(2)} (${delivered} of ${due.toFixed(0)}, ${failed} of them errors), ` +
          `out of order ${outOfOrder}, due → result p50 ${q(0.5)} ms, p99 ${q(0.99)} ms`,
      );
    }
    console.log(
      `maxInFlight ${maxInFlight}: ticks skipped ${skipped} in the window; most completions of one stream in flight at once: ${maxSeen}`,
    );
  } finally {
    for (const { socket } of sockets) await socket.close().catch(() => undefined);
    await gw.close();
    await emulator.kill();
  }
}

/**
 * The adapter under load: N concurrent legacy clip streams at 1 Hz in this process's gateway,
 * against the emulator in a child process (synthetic publisher at 64×48 and 0.2 fps under a 5 s clip window, the mini model, so
 * the gateway is what is measured) and the legacy clients in another child process.
 * Reports tick lateness, results/s, gateway CPU and RSS per stream, and the gateway's own overhead
 * per result (from the upstream answer to the WebSocket write).
 */
import path from 'node:path';
import type { Config } from '../src/config';
import { createLogger } from '../src/lib/logger';
import { startGateway } from '../src/gateway/server';
import { child, cpuMeter, emulatorChild, summary } from './util';

const kib = (b: number) => `${(b / 1024).toFixed(1)} KiB`;
const mib = (b: number) => `${(b / 1024 / 1024).toFixed(1)} MiB`;

export async function benchLegacy(cfg: Config, opts: { streams?: number; seconds?: number } = {}): Promise<void> {
  const streams = opts.streams ?? 1000;
  const seconds = opts.seconds ?? Number(process.env.BENCH_SECONDS ?? 30);
  const key = `${cfg.brand}-local-dev`;
  const { child: emulator, url: emuUrl } = await emulatorChild();

  const lateness: number[] = [];
  const overhead: number[] = [];
  let results = 0;
  let skipped = 0;
  let measuring = false;
  const gwCfg: Config = {
    ...cfg,
    port: 0,
    host: '127.0.0.1',
    logLevel: 'warn',
    legacy: { ...cfg.legacy, maxStreamsPerKey: streams, firstFramePollMs: 500 },
  };
  global.gc?.();
  const rss0 = process.memoryUsage();
  const gw = await startGateway(gwCfg, createLogger('warn'), emuUrl, {
    observer: {
      tickLateness: (ms) => measuring && lateness.push(ms),
      tickSkipped: () => measuring && skipped++,
      inference: (e) => {
        if (!measuring) return;
        results++;
        overhead.push(e.overheadMs);
      },
    },
  });
  const clients = child(path.join(__dirname, 'legacy-clients.js'), [
    JSON.stringify({
      url: gw.url,
      key,
      streams,
      body: {
        mode: 'clip',
        processing: { target_fps: 1, clip_length_seconds: 5, delay_seconds: 1 },
        inference: { prompt: 'What happens?', model: 'local/analyzer-mini', max_output_tokens: 64 },
      },
    }),
  ]);
  try {
    process.stdout.write(`creating ${streams} legacy clip streams (1 Hz) with a results socket each…\n`);
    const ids = JSON.parse(await clients.line('READY', 300_000)) as string[];
    global.gc?.();
    const idle = process.memoryUsage();
    console.log(
      `idle: ${ids.length} streams, gateway RSS +${mib(idle.rss - rss0.rss)}, heap +${mib(idle.heapUsed - rss0.heapUsed)}` +
        ` → ${kib((idle.rss - rss0.rss) / ids.length)} RSS, ${kib((idle.heapUsed - rss0.heapUsed) / ids.length)} heap per idle stream`,
    );

    // Frames start flowing: the first-frame polls see them and the schedulers start ticking.
    let started = 0;
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (started < ids.length) {
          const id = ids[started++]!;
          await fetch(`${emuUrl}/_emulator/streams/${id}/publisher`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ fps: 0.2, width: 64, height: 48 }),
          });
        }
      }),
    );
    process.stdout.write('publishers started; warming up 5 s…\n');
    await new Promise((r) => setTimeout(r, 5000));
    measuring = true;
    const cpu = cpuMeter();
    const t0 = performance.now();
    for (let s = 1; s <= seconds; s++) {
      await new Promise((r) => setTimeout(r, 1000));
      process.stdout.write(`  measuring ${s}/${seconds} s: ${results} results\r`);
    }
    measuring = false;
    const wall = (performance.now() - t0) / 1000;
    const cpuFrac = cpu();
    clients.send('COUNT');
    const counted = JSON.parse(await clients.line('COUNT')) as { results: number; failures: number };
    const mem = process.memoryUsage();
    console.log(`\n${streams} streams × 1 Hz for ${wall.toFixed(1)} s (emulator and clients in other processes)`);
    console.log(
      `  results/s            ${(results / wall).toFixed(0)} (clients received ${counted.results} in total, ${counted.failures} not ok)`,
    );
    console.log(`  tick lateness ms     ${summary(lateness)}`);
    console.log(`  skipped ticks        ${skipped}`);
    console.log(`  overhead/result ms   ${summary(overhead, 3)}  (upstream answer → WebSocket write)`);
    console.log(
      `  gateway CPU          ${(cpuFrac * 100).toFixed(0)} % of one core (${((cpuFrac * 1000) / streams).toFixed(2)} ms CPU per stream-second)`,
    );
    console.log(`  gateway RSS          ${mib(mem.rss)} (${kib((mem.rss - rss0.rss) / streams)} per stream over the baseline)`);
  } finally {
    clients.send('STOP');
    await clients.line('DONE', 120_000).catch(() => undefined);
    await clients.kill();
    await gw.close();
    await emulator.kill();
  }
}

/**
 * The /v1beta passthrough under load, against the same emulator in the same run: `/v1beta/models`
 * and a non-streaming chat completion straight to the emulator and through the gateway
 * (requests/s at a fixed concurrency, latency at one request in flight, ratios), and the
 * time to first chunk that the gateway adds to an SSE completion.
 *
 * Emulator and gateway each run as a child process (`dist/main.js emulator` / `serve`), like in
 * production; the load comes from this process over loopback keep-alive connections, in bounded
 * loops (fixed request counts, never open-ended).
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import { Pool } from 'undici';
import type { Config } from '../config';
import { child, freePort, MAIN, quantile, waitHealthy } from './util';
import type { Child } from './util';

export interface PassthroughBenchOptions {
  /** Requests per throughput round. */
  requests?: number;
  /** Requests in flight during throughput rounds. */
  concurrency?: number;
  /** Alternating direct/via rounds per scenario (the median is reported). */
  rounds?: number;
  /** Sequential requests per latency sample set. */
  latencyRequests?: number;
  /** Sequential SSE completions per side. */
  sseRequests?: number;
}

interface Target {
  name: 'direct' | 'via gateway';
  pool: Pool;
}

interface Scenario {
  label: string;
  method: 'GET' | 'POST';
  path: string;
  body?: string;
  headers: Record<string, string>;
}

const ms = (ns: bigint) => Number(ns) / 1e6;
const fmt = (x: number, d = 2) => x.toFixed(d);
const rate = (x: number) => Math.round(x).toLocaleString('en-US');

/** One request; resolves with its latency in ms (the body fully read), throws on a non-2xx. */
async function once(t: Target, s: Scenario): Promise<number> {
  const t0 = process.hrtime.bigint();
  const res = await t.pool.request({ method: s.method, path: s.path, headers: s.headers, body: s.body });
  await res.body.dump({ limit: Infinity });
  if (res.statusCode >= 300) throw new Error(`${t.name} ${s.method} ${s.path}: HTTP ${res.statusCode}`);
  return ms(process.hrtime.bigint() - t0);
}

/** `n` requests with `c` in flight; requests/s. */
async function throughput(t: Target, s: Scenario, n: number, c: number): Promise<number> {
  let issued = 0;
  const t0 = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: c }, async () => {
      while (issued < n) {
        issued += 1;
        await once(t, s);
      }
    }),
  );
  return n / (ms(process.hrtime.bigint() - t0) / 1000);
}

async function sequential(t: Target, s: Scenario, n: number): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push(await once(t, s));
  return out;
}

/** Time from sending an SSE completion to its first body chunk, ms; the rest is read to the end. */
async function firstChunk(t: Target, s: Scenario): Promise<number> {
  const t0 = process.hrtime.bigint();
  const res = await t.pool.request({ method: 'POST', path: s.path, headers: s.headers, body: s.body });
  let first = 0;
  for await (const _chunk of res.body) if (!first) first = ms(process.hrtime.bigint() - t0);
  if (res.statusCode !== 200) throw new Error(`${t.name} SSE: HTTP ${res.statusCode}`);
  return first;
}

/** User+system CPU seconds of a child process so far (Linux /proc), or NaN elsewhere. */
function cpuSeconds(pid: number | undefined): number {
  try {
    const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100; // utime, stime in clock ticks (USER_HZ = 100)
  } catch {
    return NaN;
  }
}

function progress(text: string): void {
  if (process.stderr.isTTY) process.stderr.write(`\r\x1b[2K${text}`);
}

const median = (xs: number[]) => quantile(xs, 0.5);

export async function benchPassthrough(cfg: Config, opts: PassthroughBenchOptions = {}): Promise<void> {
  const requests = opts.requests ?? Number(process.env.BENCH_PT_REQUESTS ?? 4000);
  const concurrency = opts.concurrency ?? Number(process.env.BENCH_PT_CONCURRENCY ?? 32);
  const rounds = opts.rounds ?? 5;
  const latencyRequests = opts.latencyRequests ?? 1500;
  const sseRequests = opts.sseRequests ?? 300;
  const key = `${cfg.brand}-local-dev`;
  const [emuPort, gwPort] = await Promise.all([freePort(), freePort()]);
  const children: Child[] = [];
  const pools: Pool[] = [];
  try {
    const emulator = child(MAIN, ['emulator'], {
      EMULATOR_PORT: String(emuPort),
      EMULATOR_HOST: '127.0.0.1',
      EMULATOR_AUTO_PUBLISH: 'true',
      EMULATOR_AUTO_PUBLISH_FPS: '10',
      EMULATOR_AUTO_PUBLISH_WIDTH: '160',
      EMULATOR_AUTO_PUBLISH_HEIGHT: '120',
      LOG_LEVEL: 'warn',
    });
    children.push(emulator);
    const emuUrl = `http://127.0.0.1:${emuPort}`;
    await waitHealthy(`${emuUrl}/healthz`);
    // The gateway as deployed: access log on (written to /dev/null, not read back here), metrics on.
    const proc = spawn(process.execPath, [MAIN, 'serve'], {
      env: { ...process.env, PORT: String(gwPort), HOST: '127.0.0.1', UPSTREAM_URL: emuUrl, LOG_LEVEL: 'info' },
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    const gateway = { proc };
    children.push({
      proc,
      line: () => Promise.reject(new Error('no output read')),
      send: () => undefined,
      kill: () =>
        new Promise<void>((resolve) => {
          if (proc.exitCode !== null) return resolve();
          proc.once('exit', () => resolve());
          proc.kill('SIGTERM');
        }),
    });
    const gwUrl = `http://127.0.0.1:${gwPort}`;
    await waitHealthy(`${gwUrl}/healthz`);

    const poolOpts = { connections: concurrency, pipelining: 1, keepAliveTimeout: 30_000 };
    const direct: Target = { name: 'direct', pool: new Pool(emuUrl, poolOpts) };
    const via: Target = { name: 'via gateway', pool: new Pool(gwUrl, poolOpts) };
    pools.push(direct.pool, via.pool);

    // A stream with frames for the completions (created through the gateway, published by the emulator).
    const auth = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
    const created = await via.pool.request({ method: 'POST', path: '/v1beta/streams', headers: auth, body: '{}' });
    const streamId = ((await created.body.json()) as { id: string }).id;
    for (let i = 0; i < 100; i++) {
      const r = await via.pool.request({ method: 'GET', path: `/v1beta/streams/${streamId}`, headers: auth });
      if (((await r.body.json()) as { last_frame_index: number | null }).last_frame_index !== null) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const completion = (stream: boolean): Scenario => ({
      label: stream ? 'SSE completion' : 'POST /v1beta/chat/completions',
      method: 'POST',
      path: '/v1beta/chat/completions',
      headers: auth,
      body: JSON.stringify({
        model: 'local/analyzer-mini',
        max_completion_tokens: 32,
        stream,
        messages: [
          {
            role: 'user',
            content: [
              { type: 'text', text: 'What is in the frame?' },
              { type: 'image_url', image_url: { url: `${cfg.brand}://streams/${streamId}?frame_index=-1` } },
            ],
          },
        ],
      }),
    });
    const scenarios: Scenario[] = [{ label: 'GET /v1beta/models', method: 'GET', path: '/v1beta/models', headers: {} }, completion(false)];

    console.log(
      `emulator and gateway in child processes, load from this one over loopback keep-alive; ` +
        `${requests} requests × ${rounds} rounds per side at ${concurrency} in flight, latency at 1 in flight (n=${latencyRequests})`,
    );
    const verdicts: string[] = [];
    for (const s of scenarios) {
      // Warm-up (JIT, connection pools) on both sides before anything counts.
      for (let w = 0; w < 2; w++) for (const t of [direct, via]) await throughput(t, s, Math.min(2000, requests), concurrency);
      const rps: Record<Target['name'], number[]> = { direct: [], 'via gateway': [] };
      let gwCpu = 0;
      for (let r = 0; r < rounds; r++) {
        for (const t of r % 2 ? [via, direct] : [direct, via]) {
          progress(`${s.label}: round ${r + 1}/${rounds}, ${t.name}…`);
          const cpu0 = cpuSeconds(gateway.proc.pid);
          rps[t.name].push(await throughput(t, s, requests, concurrency));
          if (t === via) gwCpu += cpuSeconds(gateway.proc.pid) - cpu0;
        }
      }
      progress(`${s.label}: latency…`);
      const lat: Record<Target['name'], number[]> = { direct: [], 'via gateway': [] };
      for (let i = 0; i < 3; i++) for (const t of [direct, via]) lat[t.name].push(...(await sequential(t, s, Math.ceil(latencyRequests / 3))));
      progress('');
      const ratio = median(rps['via gateway']) / median(rps.direct);
      const addedP50 = quantile(lat['via gateway'], 0.5) - quantile(lat.direct, 0.5);
      const addedP99 = quantile(lat['via gateway'], 0.99) - quantile(lat.direct, 0.99);
      console.log(`\n${s.label}`);
      console.log(
        `  throughput  direct ${rate(median(rps.direct))} req/s   via gateway ${rate(median(rps['via gateway']))} req/s   ` +
          `ratio ${fmt(ratio)} (target ≥ 0.80)`,
      );
      console.log(
        `  latency     direct p50 ${fmt(quantile(lat.direct, 0.5))} ms p99 ${fmt(quantile(lat.direct, 0.99))} ms   ` +
          `via gateway p50 ${fmt(quantile(lat['via gateway'], 0.5))} ms p99 ${fmt(quantile(lat['via gateway'], 0.99))} ms   ` +
          `added p50 ${fmt(addedP50)} ms, p99 ${fmt(addedP99)} ms (target ≤ 1 ms)`,
      );
      if (Number.isFinite(gwCpu)) console.log(`  gateway CPU ${fmt((gwCpu / (requests * rounds)) * 1e6, 0)} µs per proxied request`);
      verdicts.push(`${s.label}: ratio ${fmt(ratio)} ${ratio >= 0.8 ? 'meets' : 'misses'} ≥ 0.80; added p99 ${fmt(addedP99)} ms ${addedP99 <= 1 ? 'meets' : 'misses'} ≤ 1 ms`);
    }

    const sse = completion(true);
    for (const t of [direct, via]) for (let i = 0; i < 20; i++) await firstChunk(t, sse); // warm-up
    const ttfc: Record<Target['name'], number[]> = { direct: [], 'via gateway': [] };
    for (let i = 0; i < sseRequests; i++) {
      if (i % 50 === 0) progress(`SSE time to first chunk: ${i}/${sseRequests}…`);
      for (const t of i % 2 ? [via, direct] : [direct, via]) ttfc[t.name].push(await firstChunk(t, sse));
    }
    progress('');
    const d = ttfc.direct;
    const v = ttfc['via gateway'];
    console.log(`\nSSE completion, time to first chunk (n=${sseRequests} each, alternating)`);
    console.log(
      `  direct p50 ${fmt(quantile(d, 0.5))} ms p99 ${fmt(quantile(d, 0.99))} ms   via gateway p50 ${fmt(quantile(v, 0.5))} ms ` +
        `p99 ${fmt(quantile(v, 0.99))} ms   added p50 ${fmt(quantile(v, 0.5) - quantile(d, 0.5))} ms, p99 ${fmt(quantile(v, 0.99) - quantile(d, 0.99))} ms`,
    );
    console.log(`\n${verdicts.join('\n')}`);
    await via.pool.request({ method: 'DELETE', path: `/v1beta/streams/${streamId}`, headers: auth }).then((r) => r.body.dump());
  } finally {
    await Promise.all(pools.map((p) => p.close()));
    await Promise.all(children.map((c) => c.kill()));
  }
}

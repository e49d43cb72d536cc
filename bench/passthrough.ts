/**
 * The /v1beta passthrough's cost, against a bare `node:http` pipe proxy measured in the same run:
 * emulator, gateway and the bare peer each run as a child process (`dist/main.js emulator` /
 * `serve`, `dist-bench/bench/bare-proxy.js`), the load comes from this process over loopback keep-alive
 * connections in bounded loops. Reported per scenario (`/v1beta/models`, a non-streaming chat
 * completion, an SSE completion):
 * - CPU time of each proxy process per request (its own `process.cpuUsage()`, asked over IPC from
 *   the preloaded `cpu-probe.ts`), closed loop at a fixed concurrency and open loop at a fixed rate,
 *   in rounds (closed loop: bare, gateway, gateway, bare, …; fixed rate: both at once, their
 *   requests interleaved): the median of the rounds' gateway/bare ratios and their spread
 *   (target ≤ 1.15 at the fixed rate, the one the verdict reads: the closed loop's rounds spread
 *   wider in an A/A run);
 * - latency added at 1 in flight, targets (direct, bare, gateway) alternating per request: the
 *   gateway's p50 minus the bare pipe's (target ≤ 0.1 ms).
 * Throughput ratios and absolute p99s are not reported: on a shared small machine they measure how
 * the cores are shared more than the proxy.
 *
 * `BENCH_PT_SCENARIOS` picks some of `models,completion,sse`; `BENCH_PT_GATEWAY_MAIN` runs another build's `main.js` as the gateway (before/after comparisons);
 * `BENCH_PT_AA=1` puts a second bare pipe where the gateway runs (an A/A run: the ratios it prints are the bench's noise);
 * `OTEL_*` variables reach the gateway (and the bare pipe, which ignores them) but not the emulator: a run with tracing on;
 * `BENCH_PT_GATEWAY_NODE_ARGS` / `BENCH_PT_BARE_NODE_ARGS` are node flags for either proxy (e.g.
 * `--cpu-prof --cpu-prof-dir=…`).
 */
import { execFileSync, spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { Pool } from 'undici';
import type { Config } from '../src/config';
import { freePort, quantile } from '../test/helpers/util';
import { child, MAIN, waitHealthy } from './util';
import type { Child } from './util';

export interface PassthroughBenchOptions {
  /** Requests per closed-loop round and per proxy. */
  requests?: number;
  /** Requests in flight during closed-loop rounds. */
  concurrency?: number;
  /** Alternating bare/gateway rounds per scenario and loop (the median is reported). */
  rounds?: number;
  /** Requests per second of the fixed-rate rounds. */
  rate?: number;
  /** Requests per target at 1 in flight (latency). */
  latencyRequests?: number;
  /** SSE completions per closed-loop round and per proxy. */
  sseRequests?: number;
}

type Name = 'direct' | 'bare' | 'gateway';

interface Target {
  name: Name;
  pool: Pool;
  /** The proxy's process, preloaded with the CPU probe (none for the emulator itself). */
  proc?: ChildProcess;
}

interface Scenario {
  label: string;
  method: 'GET' | 'POST';
  path: string;
  body?: string;
  headers: Record<string, string>;
  sse?: boolean;
}

const fmt = (x: number, d = 2) => x.toFixed(d);
const PROBE = path.join(__dirname, 'cpu-probe.js');
/** Extra node flags for one of the proxies, from the environment (profiling). */
const nodeArgs = (name: string) => process.env[name]?.split(' ').filter(Boolean) ?? [];
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** One request, its body read to the end; resolves with [latency, time to first body chunk] in ms. */
async function once(t: Target, s: Scenario): Promise<[number, number]> {
  const t0 = performance.now();
  const res = await t.pool.request({ method: s.method, path: s.path, headers: s.headers, body: s.body });
  if (res.statusCode >= 300)
    throw new Error(`${t.name} ${s.method} ${s.path}: HTTP ${res.statusCode} ${(await res.body.text()).slice(0, 300)}`);
  let first = 0;
  for await (const _chunk of res.body) if (!first) first = performance.now() - t0;
  return [performance.now() - t0, first];
}

/** `n` requests with `c` in flight; the first failure stops every loop and is thrown once all have stopped. */
async function closedLoop(t: Target, s: Scenario, n: number, c: number): Promise<void> {
  let issued = 0;
  let failure: unknown;
  await Promise.all(
    Array.from({ length: c }, async () => {
      while (issued < n && failure === undefined) {
        issued += 1;
        await once(t, s).catch((err: unknown) => (failure ??= err));
      }
    }),
  );
  if (failure !== undefined) throw failure;
}

/**
 * `n` requests to each target, each at `rps` per second whatever the answers (open loop, at most
 * 512 in flight), the targets' requests interleaved one by one: both proxies run through the same
 * seconds, so a neighbour's burst lands on both.
 */
async function fixedRate(targets: Target[], s: Scenario, n: number, rps: number): Promise<void> {
  const t0 = performance.now();
  const k = targets.length;
  const pending = new Set<Promise<unknown>>();
  // A failure stops the schedule; it is thrown once nothing is in flight (no stray rejections).
  let failure: unknown;
  for (let i = 0; i < n * k && failure === undefined; i++) {
    const wait = t0 + (i * 1000) / (rps * k) - performance.now();
    if (wait >= 1) await sleep(wait);
    while (pending.size >= 512) await Promise.race(pending);
    const p = once(targets[i % k]!, s)
      .catch((err: unknown) => (failure ??= err))
      .finally(() => pending.delete(p));
    pending.add(p);
  }
  await Promise.all(pending);
  if (failure !== undefined) throw failure;
}

/** CPU µs (user+system, all threads) a proxy process has used so far, asked over IPC (`cpu-probe.ts`). */
function cpuMicros(t: Target): Promise<number> {
  const proc = t.proc!;
  return new Promise((resolve, reject) => {
    const onExit = () => reject(new Error(`${t.name} exited`));
    proc.once('exit', onExit);
    proc.once('message', (us) => {
      proc.off('exit', onExit);
      resolve(Number(us));
    });
    proc.send('cpu');
  });
}

function progress(text: string): void {
  if (process.stderr.isTTY) process.stderr.write(`\r\x1b[2K${text}`);
}

const median = (xs: number[]) => quantile(xs, 0.5);

/** CPU µs per request of each proxy process over `run` (which sends `n` requests through each). */
async function cpuPerRequest(targets: Target[], n: number, run: () => Promise<void>): Promise<number[]> {
  const c0 = await Promise.all(targets.map(cpuMicros));
  await run();
  const c1 = await Promise.all(targets.map(cpuMicros));
  return c1.map((c, i) => (c - c0[i]!) / n);
}

/**
 * `rounds` measurements of both proxies, each round giving one gateway/bare ratio: `alternate`
 * runs them back to back (bare, gateway, then gateway, bare, …), `together` runs one load that
 * interleaves them (`run` gets both). Either way a neighbour's load shifts both sides of a round's
 * ratio. The median ratio over rounds and its spread (min–max), and the median µs of each.
 */
async function compareCpu(
  label: string,
  bare: Target,
  gw: Target,
  rounds: number,
  n: number,
  schedule: 'alternate' | 'together',
  run: (t: Target[]) => Promise<void>,
) {
  const us: Record<'bare' | 'gateway', number[]> = { bare: [], gateway: [] };
  for (let r = 0; r < rounds; r++) {
    progress(`${label}: round ${r + 1}/${rounds}…`);
    if (schedule === 'together') {
      const [b, g] = await cpuPerRequest([bare, gw], n, () => run([bare, gw]));
      us.bare.push(b!);
      us.gateway.push(g!);
      continue;
    }
    for (const t of r % 2 ? [gw, bare] : [bare, gw])
      us[t.name as 'bare' | 'gateway'].push((await cpuPerRequest([t], n, () => run([t])))[0]!);
  }
  progress('');
  const ratios = us.gateway.map((g, r) => g / us.bare[r]!);
  const ratio = median(ratios);
  const spread = `${fmt(Math.min(...ratios))}–${fmt(Math.max(...ratios))}`;
  return {
    ratio,
    text:
      `ratio ${fmt(ratio)} (spread ${spread}; rounds ${ratios.map((x) => fmt(x)).join('/')})  ` +
      `bare ${fmt(median(us.bare), 0)} µs  gateway ${fmt(median(us.gateway), 0)} µs`,
  };
}

/** Latency at 1 in flight, the targets alternating per request (rotating who goes first). */
async function latency(targets: Target[], s: Scenario, n: number): Promise<Record<Name, { total: number[]; first: number[] }>> {
  const out = { direct: { total: [], first: [] }, bare: { total: [], first: [] }, gateway: { total: [], first: [] } } as Record<
    Name,
    { total: number[]; first: number[] }
  >;
  for (let i = 0; i < n; i++) {
    if (i % 100 === 0) progress(`${s.label}: latency ${i}/${n}…`);
    for (let k = 0; k < targets.length; k++) {
      const t = targets[(i + k) % targets.length]!;
      const [total, first] = await once(t, s);
      out[t.name].total.push(total);
      out[t.name].first.push(first);
    }
  }
  progress('');
  return out;
}

/**
 * Where the processes run (`BENCH_PT_PIN`, on by default where `taskset` exists and there are ≥ 2
 * cores; `0` turns it off): both proxies on the last core, the emulator and this load generator on
 * the others. Unpinned, a proxy's CPU per request follows how the scheduler happens to share the
 * cores with the load (a round moved 0.9–1.5× on 2 cores); pinned, both proxies see the same
 * arrival pattern on a core of their own, which is what a per-request cost comparison needs.
 */
function placement(): { proxies: string; rest: string } | undefined {
  const cores = os.cpus().length;
  if (process.env.BENCH_PT_PIN === '0' || cores < 2) return undefined;
  try {
    execFileSync('taskset', ['-p', String(process.pid)], { stdio: 'ignore' });
  } catch {
    return undefined; // no taskset here
  }
  return { proxies: String(cores - 1), rest: cores === 2 ? '0' : `0-${cores - 2}` };
}

/** Moves every thread of a running process onto `cpus` (threads it starts later inherit it). */
function pin(pid: number | undefined, cpus: string): void {
  if (pid !== undefined) execFileSync('taskset', ['-a', '-c', '-p', cpus, String(pid)], { stdio: 'ignore' });
}

export async function benchPassthrough(cfg: Config, opts: PassthroughBenchOptions = {}): Promise<void> {
  const env = (name: string, dflt: number) => Number(process.env[name] ?? dflt);
  const requests = opts.requests ?? env('BENCH_PT_REQUESTS', 2000);
  const concurrency = opts.concurrency ?? env('BENCH_PT_CONCURRENCY', 64);
  const rounds = opts.rounds ?? env('BENCH_PT_ROUNDS', 5);
  const rate = opts.rate ?? env('BENCH_PT_RATE', 400);
  const latencyRequests = opts.latencyRequests ?? env('BENCH_PT_LATENCY', 600);
  const sseRequests = opts.sseRequests ?? env('BENCH_PT_SSE', 400);
  const gatewayMain = process.env.BENCH_PT_GATEWAY_MAIN ?? MAIN;
  const key = `${cfg.brand}-local-dev`;
  const [emuPort, gwPort, barePort] = await Promise.all([freePort(), freePort(), freePort()]);
  const children: Child[] = [];
  const pools: Pool[] = [];
  const timers: NodeJS.Timeout[] = [];
  let pinned = false;
  try {
    const emulator = child(MAIN, ['emulator'], {
      EMULATOR_PORT: String(emuPort),
      EMULATOR_HOST: '127.0.0.1',
      EMULATOR_AUTO_PUBLISH: 'true',
      EMULATOR_AUTO_PUBLISH_FPS: '10',
      EMULATOR_AUTO_PUBLISH_WIDTH: '160',
      EMULATOR_AUTO_PUBLISH_HEIGHT: '120',
      LOG_LEVEL: 'warn',
      // OTEL_* of the bench's environment are for the gateway (tracing off/on runs): the upstream stays untraced.
      OTEL_SDK_DISABLED: 'true',
    });
    children.push(emulator);
    const emuUrl = `http://127.0.0.1:${emuPort}`;
    await waitHealthy(`${emuUrl}/healthz`);
    // The gateway as deployed: access log on (written to /dev/null, not read back here), metrics on.
    // BENCH_PT_AA=1: a second bare pipe in the gateway's place, so the ratios show the bench's own noise floor.
    const aa = process.env.BENCH_PT_AA === '1';
    const gatewayArgs = aa ? [path.join(__dirname, 'bare-proxy.js'), String(gwPort), emuUrl] : [gatewayMain, 'serve'];
    const proc = spawn(process.execPath, ['-r', PROBE, ...nodeArgs('BENCH_PT_GATEWAY_NODE_ARGS'), ...gatewayArgs], {
      env: { ...process.env, PORT: String(gwPort), HOST: '127.0.0.1', UPSTREAM_URL: emuUrl, LOG_LEVEL: 'info' },
      stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
    });
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
    const bareProc = child(
      path.join(__dirname, 'bare-proxy.js'),
      [String(barePort), emuUrl],
      {},
      { nodeArgs: ['-r', PROBE, ...nodeArgs('BENCH_PT_BARE_NODE_ARGS')], ipc: true },
    );
    children.push(bareProc);
    await bareProc.line('listening');
    const gwUrl = `http://127.0.0.1:${gwPort}`;
    await waitHealthy(`${gwUrl}/healthz`);
    const cores = placement();
    pinned = cores !== undefined;
    if (cores) {
      for (const pid of [proc.pid, bareProc.proc.pid]) pin(pid, cores.proxies);
      for (const pid of [emulator.proc.pid, process.pid]) pin(pid, cores.rest);
    }

    const poolOpts = { connections: concurrency, pipelining: 1, keepAliveTimeout: 30_000 };
    const direct: Target = { name: 'direct', pool: new Pool(emuUrl, poolOpts) };
    const bare: Target = { name: 'bare', pool: new Pool(`http://127.0.0.1:${barePort}`, poolOpts), proc: bareProc.proc };
    const gw: Target = { name: 'gateway', pool: new Pool(gwUrl, poolOpts), proc };
    pools.push(direct.pool, bare.pool, gw.pool);

    // A stream with frames for the completions (created through the gateway, published by the emulator).
    const auth = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
    const created = await gw.pool.request({ method: 'POST', path: '/v1beta/streams', headers: auth, body: '{}' });
    if (created.statusCode !== 201) throw new Error(`creating the bench's stream: HTTP ${created.statusCode} ${await created.body.text()}`);
    const streamId = ((await created.body.json()) as { id: string }).id;
    // Kept alive past its TTL straight at the emulator (not through a measured proxy): a run on a
    // loaded machine outlasts it.
    const keepalive = () =>
      direct.pool.request({ method: 'POST', path: `/v1beta/streams/${streamId}/keepalive`, headers: auth, body: '{}' }).then(
        (r) => r.body.dump(),
        () => undefined,
      );
    timers.push(setInterval(() => void keepalive(), 10_000));
    for (let i = 0; i < 100; i++) {
      const r = await gw.pool.request({ method: 'GET', path: `/v1beta/streams/${streamId}`, headers: auth });
      if (((await r.body.json()) as { last_frame_index: number | null }).last_frame_index !== null) break;
      await sleep(100);
    }
    const completion = (stream: boolean): Scenario => ({
      label: stream ? 'SSE completion' : 'POST /v1beta/chat/completions',
      method: 'POST',
      path: '/v1beta/chat/completions',
      headers: auth,
      sse: stream,
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
    const all: Record<string, Scenario> = {
      models: { label: 'GET /v1beta/models', method: 'GET', path: '/v1beta/models', headers: {} },
      completion: completion(false),
      sse: completion(true),
    };
    const scenarios = (process.env.BENCH_PT_SCENARIOS ?? 'models,completion,sse')
      .split(',')
      .map((name) => all[name.trim()]!)
      .filter(Boolean);

    console.log(
      `emulator, gateway and a bare node:http pipe proxy in child processes on ${os.cpus().length} cores ` +
        `(${cores ? `proxies pinned to core ${cores.proxies}, emulator and load to ${cores.rest}` : 'unpinned'}), load from this one over loopback keep-alive; ` +
        (aa ? 'A/A RUN: a second bare pipe stands in for the gateway; ' : '') +
        `CPU per request of each proxy process: ${requests} requests (SSE ${sseRequests}) × ${rounds} alternating rounds at ${concurrency} in flight, ` +
        `and at a fixed ${rate} requests/s to each, their requests interleaved; latency at 1 in flight, targets alternating per request (n=${latencyRequests} each)`,
    );
    const verdicts: string[] = [];
    for (const s of scenarios) {
      const n = s.sse ? sseRequests : requests;
      const c = s.sse ? Math.min(concurrency, 16) : concurrency;
      // Warm-up (JIT, connection pools) on both proxies before anything counts.
      for (let w = 0; w < 2; w++) for (const t of [bare, gw]) await closedLoop(t, s, Math.min(1000, n), c);
      const closed = await compareCpu(`${s.label} closed loop`, bare, gw, rounds, n, 'alternate', ([t]) => closedLoop(t!, s, n, c));
      const fixedN = Math.min(n, rate * 5);
      const fixed = await compareCpu(`${s.label} fixed rate`, bare, gw, rounds, fixedN, 'together', (ts) =>
        fixedRate(ts, s, fixedN, s.sse ? Math.min(rate, 100) : rate),
      );
      const lat = await latency([direct, bare, gw], s, s.sse ? Math.min(latencyRequests, 200) : latencyRequests);
      const pick = (name: Name) => (s.sse ? lat[name].first : lat[name].total);
      const p50 = (name: Name) => quantile(pick(name), 0.5);
      const added = p50('gateway') - p50('bare');
      console.log(`\n${s.label}`);
      console.log(`  CPU per request, closed loop (${c} in flight)   ${closed.text}`);
      console.log(`  CPU per request, fixed ${s.sse ? Math.min(rate, 100) : rate}/s        ${fixed.text}`);
      console.log(
        `  ${s.sse ? 'time to first chunk' : 'latency'} at 1 in flight, p50: direct ${fmt(p50('direct'))} ms  bare ${fmt(p50('bare'))} ms  ` +
          `gateway ${fmt(p50('gateway'))} ms  added over bare ${fmt(added)} ms (target ≤ 0.10)`,
      );
      const meets = (ok: boolean) => (ok ? 'meets' : 'misses');
      verdicts.push(
        `${s.label}: CPU ratio ${fmt(closed.ratio)} closed / ${fmt(fixed.ratio)} fixed, fixed ${meets(fixed.ratio <= 1.15)} ≤ 1.15; ` +
          `added p50 ${fmt(added)} ms ${meets(added <= 0.1)} ≤ 0.10 ms`,
      );
    }
    // What each process burns with no request at all (timers, metrics sampling, cron), after the load
    // (not right after boot): part of every fixed-rate figure (at 400/s, 4 ms/s is 10 µs per request).
    const idle = await cpuPerRequest([bare, gw], 1, async () => void (await sleep(3000)));
    console.log(`\nidle CPU after the load, no requests for 3 s: bare ${fmt(idle[0]! / 3000)} ms/s  gateway ${fmt(idle[1]! / 3000)} ms/s`);
    console.log(`\n${verdicts.join('\n')}`);
    await gw.pool.request({ method: 'DELETE', path: `/v1beta/streams/${streamId}`, headers: auth }).then((r) => r.body.dump());
  } finally {
    // The sections after this one get every core back.
    if (pinned) pin(process.pid, `0-${os.cpus().length - 1}`);
    for (const t of timers) clearInterval(t);
    await Promise.all(pools.map((p) => p.close()));
    await Promise.all(children.map((c) => c.kill()));
  }
}

/**
 * `npm run bench scale`: what a legacy stream costs on one process and on a fleet. N frame-mode
 * streams at 1 Hz over R replicas of the built CLI (R = 1: the memory store; R ≥ 2: one
 * redis-server, through the fleet harness), against the fast upstream stub (fast-upstream.ts) so the
 * gateway is what is measured. Stream i is created on replica i mod R and its results socket opened
 * on the next replica (the same one when R = 1), by client processes (legacy-clients.ts) with 5
 * streams per key and a keepalive every 20 s, as legacy clients do. After a warm-up, over
 * BENCH_SECONDS it prints per setup:
 * - gateway CPU per stream-second (all replicas, /proc), the busiest replica's mean and peak 1 s CPU;
 * - tick lateness p50/p99 and result overhead p99: bucket bounds of the replicas' /metrics
 *   histograms (per-tick values stay inside the replicas);
 * - results received ÷ expected (N × seconds) and duplicate result ids at the clients;
 * - RSS per stream on each replica, over its idle RSS (each replica owns N/R streams and holds N/R sockets);
 * - store calls per stream-second by operation (/metrics), and on Redis the commands it executed per
 *   stream-second by command (INFO commandstats: a script counts as EVALSHA and each call inside it
 *   under its own name);
 * - in the closing table, the fleet's CPU over one process's at N streams and, when that ran too, at
 *   N/R streams (one replica's share).
 *
 * The RSS figure is the loaded mean over the idle mean (garbage between collections included, as a
 * process carries it); beside it the V8 heap in use and the external (native) memory per stream, from
 * the replicas' own gauges, split what the JS heap holds from what zlib, buffers and sockets do.
 *
 * BENCH_SCALE_STREAMS and BENCH_SCALE_REPLICAS take lists (every pair runs); BENCH_SCALE_PER_KEY,
 * BENCH_SCALE_UPSTREAM_WORKERS, BENCH_SCALE_CLIENTS and BENCH_SCALE_WARMUP_S size the rest.
 * BENCH_SCALE_HEAPSNAPSHOTS=<dir> writes a heap snapshot of each replica there when idle and again
 * at the end of the measurement (`node bench/heap-diff.js idle loaded streams` compares two).
 * STORE_COMMIT_BATCH_MS, when set, is passed to every replica (an A/B of the commit batch window).
 * BENCH_SCALE_NODE_ARGS passes node flags to every replica (`--cpu-prof --cpu-prof-dir=DIR`: the
 * replicas then exit with SIGTERM, after the clients deleted their streams, so the profiles are written).
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { brandOf } from '../src/brand';
import type { Config } from '../src/config';
import { startFleet } from '../test/helpers/fleet';
import { ROOT } from '../test/helpers/util';
import { serverCommandCalls } from '../test/helpers/redis';
import type { Fleet } from '../test/helpers/fleet';
import type { ClientCounts } from './legacy-clients';
import type { FastUpstreamArgs } from './fast-upstream';
import type { BenchFlags } from './main';
import { MAIN, bucketQuantile, child, commandDeltas, procSample, scrapeMetrics, seriesDelta } from './util';
import type { Child } from './util';

export interface ScaleSetup {
  streams: number;
  replicas: number;
  seconds: number;
  /** Streams per API key (the per-key limit is set to it). */
  perKey: number;
  upstreamWorkers: number;
  /** Client processes the streams are split over. */
  clients: number;
  warmupSeconds: number;
  /** The fleet's Redis: one redis-server, or a 3-primary Cluster (`--store cluster`). */
  redisStore: 'redis' | 'cluster';
}

/** One setup's figures, for the closing table. */
interface ScaleRow {
  label: string;
  streams: number;
  replicas: number;
  cpuMsPerStreamSecond: number;
  peakPct: number;
  lateness: string;
  overheadP99: string;
  received: number;
  duplicates: number;
  rssKibPerStream: number;
  heapKibPerStream: number;
  externalKibPerStream: number;
  redisPerStreamSecond: number | undefined;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const mib = (kb: number) => `${(kb / 1024).toFixed(0)} MiB`;
const BODY = {
  mode: 'frame',
  processing: { interval_seconds: 1 },
  inference: { prompt: 'Describe the frame', model: 'local/analyzer-mini', max_output_tokens: 32 },
};
const LATENESS = 'gateway_legacy_tick_lateness_seconds';
const HEAP_USED = 'nodejs_heap_size_used_bytes';
const HEAP_TOTAL = 'nodejs_heap_size_total_bytes';
const EXTERNAL = 'nodejs_external_memory_bytes';

/** Has each replica write a heap snapshot into `dir` (SIGUSR2; V8 collects garbage first) and waits for the files. */
async function heapSnapshots(dir: string, pids: number[], tag: string): Promise<void> {
  for (const pid of pids) {
    const before = new Set(fs.readdirSync(dir));
    process.kill(pid, 'SIGUSR2');
    // Written by the replica's main thread, which answers nothing meanwhile: done once the size stops moving.
    let file: string | undefined;
    for (let last = -1, tries = 0; tries < 600; tries++) {
      await sleep(1000);
      file ??= fs.readdirSync(dir).find((f) => !before.has(f) && f.endsWith('.heapsnapshot'));
      if (!file) continue;
      const size = fs.statSync(path.join(dir, file)).size;
      if (size > 0 && size === last) break;
      last = size;
    }
    if (file) fs.renameSync(path.join(dir, file), path.join(dir, `${tag}-${pid}.heapsnapshot`));
  }
}
const OVERHEAD = 'gateway_legacy_result_overhead_seconds';

function progress(text: string): void {
  if (process.stderr.isTTY) process.stderr.write(`\r\x1b[2K${text}`);
}

/** A list of whole numbers > 0 from a flag or the environment (`1,3`). */
function numbers(raw: string | undefined, fallback: number[], name: string): number[] {
  if (raw === undefined || raw === '') return fallback;
  const out = raw.split(',').map(Number);
  if (!out.every((n) => Number.isInteger(n) && n > 0))
    throw new Error(`${name} must be whole numbers > 0 separated by commas, got '${raw}'`);
  return out;
}

/** Resolves with a child's `prefix` line, or fails as soon as the child exits without one. */
async function lineOrExit(c: Child, prefix: string, timeoutMs: number, what: string): Promise<string> {
  const exited = new Promise<never>((_, reject) =>
    c.proc.once('exit', (code, signal) => reject(new Error(`${what} exited (${code ?? signal}) before "${prefix}"`))),
  );
  return Promise.race([c.line(prefix, timeoutMs), exited]);
}

/** The open-files limit children inherit; a note when it is short of what N streams hold. */
function fileLimitNote(streams: number): string | undefined {
  let limit = Infinity;
  try {
    const out = execFileSync('sh', ['-c', 'ulimit -n'], { encoding: 'utf8' }).trim();
    if (out !== 'unlimited') limit = Number(out);
  } catch {
    return undefined;
  }
  // The clients hold a socket per stream plus pooled HTTP connections; a replica its share of sockets and its upstream pool.
  if (limit >= streams * 2 + 2048 && streams < 1000) return undefined;
  return `note: ${streams} streams hold about ${streams} client sockets and as many on the replicas; open-files limit here ${limit}: raise it first (ulimit -n 65536)`;
}

async function startUpstream(cfg: Config, workers: number): Promise<{ url: string; pids: number[]; proc: Child }> {
  const brand = brandOf(cfg);
  const args: FastUpstreamArgs = { workers, brandField: brand.responseField, room: brand.room };
  const proc = child(path.join(__dirname, 'fast-upstream.js'), [JSON.stringify(args)]);
  try {
    const ready = JSON.parse(await lineOrExit(proc, 'READY', 30_000, 'fast upstream')) as { port: number; pids: number[] };
    return { url: `http://127.0.0.1:${ready.port}`, pids: ready.pids, proc };
  } catch (err) {
    await proc.kill();
    throw err;
  }
}

/** Sum of each client process's counts. */
async function countAll(clients: Child[]): Promise<ClientCounts> {
  const all = await Promise.all(
    clients.map(async (c) => {
      const counted = c.line('COUNT', 30_000);
      c.send('COUNT');
      return JSON.parse(await counted) as ClientCounts;
    }),
  );
  const sum: ClientCounts = { results: 0, failures: 0, duplicates: 0, keepalives: 0, keepaliveFailures: 0, open: 0 };
  for (const c of all) for (const k of Object.keys(sum) as (keyof ClientCounts)[]) sum[k] += c[k];
  return sum;
}

/** Redis's own CPU seconds so far (INFO cpu). */
/** CPU seconds of the fleet's Redis (every node of a Cluster). */
async function redisCpuSeconds(fleet: Fleet): Promise<number> {
  const infos = fleet.cluster
    ? await Promise.all(fleet.cluster.nodes.map((n) => n.command('INFO', 'cpu')))
    : [String(await fleet.redisCall('INFO', 'cpu'))];
  const field = (info: string, name: string) => Number(new RegExp(`^${name}:([\\d.]+)`, 'm').exec(info)?.[1] ?? 0);
  return infos.reduce((k, info) => k + field(info, 'used_cpu_user') + field(info, 'used_cpu_sys'), 0);
}

/** Store calls per operation from the replicas' `gateway_store_command_seconds` counts, busiest first. */
function storeCalls(before: Map<string, number>, after: Map<string, number>): [string, number][] {
  const prefix = 'gateway_store_command_seconds_count{op="';
  return [...after.keys()]
    .filter((k) => k.startsWith(prefix))
    .map((k): [string, number] => [k.slice(prefix.length, -2), seriesDelta(before, after, k)])
    .filter(([, n]) => n > 0)
    .sort((x, y) => y[1] - x[1]);
}

const perSecond = (entries: [string, number][], streamSeconds: number, top = 10) =>
  entries
    .slice(0, top)
    .map(([name, n]) => `${name} ${(n / streamSeconds).toFixed(3)}`)
    .join(', ');

async function runSetup(cfg: Config, setup: ScaleSetup, clkTck: number): Promise<ScaleRow> {
  const { streams, replicas, seconds, perKey } = setup;
  const store = replicas === 1 ? 'memory' : setup.redisStore;
  const storeName = store === 'cluster' ? '3-primary Redis Cluster' : 'Redis store';
  const label = `${streams} streams, ${replicas === 1 ? '1 process, memory store' : `${replicas} replicas, ${storeName}`}`;
  const snapshotDir = process.env.BENCH_SCALE_HEAPSNAPSHOTS ? path.resolve(process.env.BENCH_SCALE_HEAPSNAPSHOTS) : undefined;
  if (snapshotDir) fs.mkdirSync(snapshotDir, { recursive: true });
  console.log(`\n${label}`);
  const upstream = await startUpstream(cfg, setup.upstreamWorkers);
  let fleet: Fleet | undefined;
  // Set once the run stops the replicas itself.
  let stopping = false;
  const clients: Child[] = [];
  try {
    const f = await startFleet({
      main: MAIN,
      ids: Array.from({ length: replicas }, (_, i) => (i < 26 ? String.fromCharCode(65 + i) : `R${i}`)),
      store,
      // The harness's emulator idles: the replicas are pointed at the stub.
      publisher: false,
      logLevel: 'warn',
      keepLines: false,
      env: {
        UPSTREAM_URL: upstream.url,
        LEGACY_MAX_STREAMS_PER_KEY: String(perKey),
        // The production image's malloc settings (Dockerfile).
        MALLOC_ARENA_MAX: '2',
        MALLOC_TRIM_THRESHOLD_: '131072',
        // An A/B of the commit batch window (docs/configuration.md), else the default.
        ...(process.env.STORE_COMMIT_BATCH_MS ? { STORE_COMMIT_BATCH_MS: process.env.STORE_COMMIT_BATCH_MS } : {}),
      },
      nodeArgs: [
        // The production image's V8 heap setting (Dockerfile ENTRYPOINT).
        ...IMAGE_NODE_ARGS,
        ...(snapshotDir ? ['--heapsnapshot-signal=SIGUSR2', `--diagnostic-dir=${snapshotDir}`] : []),
        ...replicaNodeArgs(),
      ],
    });
    fleet = f;
    const reps = f.replicas;
    // A replica that dies mid-run says why.
    for (const r of reps) {
      r.proc.child.once('exit', (code, signal) => {
        if (!stopping) console.error(`\nreplica ${r.id} exited (${code ?? signal}):\n${r.proc.stderr().slice(-4000)}`);
      });
    }
    const urls = reps.map((r) => r.url);
    const sample = () => reps.map((r) => procSample(r.proc.child.pid!, clkTck));
    const meanRss = (samples: { rssKb: number }[][]) => reps.map((_, i) => samples.reduce((k, s) => k + s[i]!.rssKb, 0) / samples.length);
    // Idle RSS once boot's garbage is gone: the mean of the last 3 s of 6.
    const idleSamples: { rssKb: number }[][] = [];
    for (let s = 0; s < 6; s++, await sleep(1000)) if (s >= 3) idleSamples.push(sample());
    const idleRss = meanRss(idleSamples);
    const idleMetrics = await scrapeMetrics(urls);
    const replicaPids = reps.map((r) => r.proc.child.pid!);
    if (snapshotDir) await heapSnapshots(snapshotDir, replicaPids, `idle-${streams}`);

    // Keys of the stub's own format (the brand's prefix): any one is an account with credits.
    const keyCount = Math.ceil(streams / perKey);
    const keys = Array.from({ length: keyCount }, (_, i) => `${brandOf(cfg).keyPrefix}scale-${String(i).padStart(5, '0')}`);
    const share = Math.ceil(streams / setup.clients);
    for (let first = 0; first < streams; first += share) {
      const n = Math.min(share, streams - first);
      clients.push(
        child(path.join(__dirname, 'legacy-clients.js'), [
          JSON.stringify({ url: urls[0], urls, key: keys[0], keys, streams: n, first, body: BODY }),
        ]),
      );
    }
    progress(`creating ${streams} streams over ${replicas} replica(s), ${keyCount} keys, ${clients.length} client process(es)…`);
    const createMs = Date.now();
    // Bounded by the size: a create is one upstream call and a few store calls.
    await Promise.all(clients.map((c, i) => lineOrExit(c, 'READY', 120_000 + streams * 100, `client process ${i}`)));
    const createdIn = (Date.now() - createMs) / 1000;
    // Every stream ticking (results at 95 % of N per second), then the warm-up.
    let ticking = false;
    for (let prev = await countAll(clients), at = performance.now(), tries = 0; !ticking && tries < 60; tries++) {
      await sleep(1000);
      const cur = await countAll(clients);
      const now = performance.now();
      ticking = cur.results - prev.results >= (0.95 * streams * (now - at)) / 1000;
      [prev, at] = [cur, now];
    }
    progress(`warming up ${setup.warmupSeconds} s…`);
    await sleep(setup.warmupSeconds * 1000);

    const pids = { upstream: upstream.pids, clients: clients.map((c) => c.proc.pid!) };
    const cpuOf = (list: number[]) => list.reduce((k, pid) => k + procSample(pid, clkTck).cpuMs, 0);
    const snapshot = async () => ({
      cpu: sample().map((x) => x.cpuMs),
      metrics: await scrapeMetrics(urls),
      commands: store !== 'memory' ? await f.redisCommands() : undefined,
      perPrimary: f.cluster ? await Promise.all(f.cluster.nodes.map(serverCommandCalls)) : undefined,
      redisCpu: store !== 'memory' ? await redisCpuSeconds(f) : 0,
      counts: await countAll(clients),
      countedAt: performance.now(),
      upstreamMs: cpuOf(pids.upstream),
      clientsMs: cpuOf(pids.clients),
    });
    const before = await snapshot();
    const t0 = performance.now();
    // 1 s samples of each replica: CPU for the peak (/proc: 10 ms ticks, so ±1 %), RSS for its mean.
    let last = { at: t0, cpu: before.cpu };
    let peakPct = 0;
    const loadedSamples: { rssKb: number }[][] = [];
    for (let s = 1; s <= seconds; s++) {
      await sleep(t0 + s * 1000 - performance.now());
      const samples = sample();
      const now = { at: performance.now(), cpu: samples.map((x) => x.cpuMs) };
      for (let i = 0; i < reps.length; i++) peakPct = Math.max(peakPct, ((now.cpu[i]! - last.cpu[i]!) * 100) / (now.at - last.at));
      last = now;
      loadedSamples.push(samples);
      progress(`measuring ${s}/${seconds} s…`);
    }
    const wall = (performance.now() - t0) / 1000;
    const after = await snapshot();
    const rss = meanRss(loadedSamples);
    if (snapshotDir) await heapSnapshots(snapshotDir, replicaPids, `loaded-${streams}`);
    progress('');

    const streamSeconds = streams * wall;
    const cpuEach = reps.map((_, i) => (after.cpu[i]! - before.cpu[i]!) / 1000);
    const cpu = cpuEach.reduce((k, x) => k + x, 0);
    const busiest = Math.max(...cpuEach);
    const got = after.counts.results - before.counts.results;
    // Expected over the clients' own counting interval (the snapshots take a moment beside the window).
    const expected = (streams * (after.countedAt - before.countedAt)) / 1000;
    const dups = after.counts.duplicates;
    const rssPerStream = rss.map((kb, i) => ((kb - idleRss[i]!) * replicas) / streams);
    const meanRssPerStream = rssPerStream.reduce((k, x) => k + x, 0) / replicas;
    // Summed over the replicas by the scrape: per stream of the fleet.
    const gaugePerStream = (name: string) => seriesDelta(idleMetrics, after.metrics, name) / 1024 / streams;
    const ticksSeen = seriesDelta(before.metrics, after.metrics, `${LATENESS}_count`);
    const lateness = `${bucketQuantile(before.metrics, after.metrics, LATENESS, 0.5)} / ${bucketQuantile(before.metrics, after.metrics, LATENESS, 0.99)}`;
    const overheadP99 = bucketQuantile(before.metrics, after.metrics, OVERHEAD, 0.99);
    const skipped = seriesDelta(before.metrics, after.metrics, 'gateway_legacy_ticks_skipped_total');
    const fenced = ['fenced', 'duplicate', 'ended', 'missing'].reduce(
      (k, r) => k + seriesDelta(before.metrics, after.metrics, `gateway_fleet_fenced_ticks_total{reason="${r}"}`),
      0,
    );
    const calls = storeCalls(before.metrics, after.metrics);
    const callsTotal = calls.reduce((k, [, n]) => k + n, 0);

    console.log(
      `  created in ${createdIn.toFixed(1)} s${ticking ? '' : ' (not every stream ticking within 60 s)'}; measured ${wall.toFixed(1)} s after a ${setup.warmupSeconds} s warm-up`,
    );
    console.log(
      `  gateway CPU            ${((cpu * 1000) / streamSeconds).toFixed(3)} ms per stream-second (${((cpu / wall) * 100).toFixed(0)} % of a core over ${replicas === 1 ? '1 replica' : `${replicas} replicas`}); ` +
        `busiest replica ${((busiest / wall) * 100).toFixed(0)} % mean, ${peakPct.toFixed(0)} % peak 1 s`,
    );
    console.log(`  tick lateness p50/p99  ${lateness}  (${ticksSeen} ticks; skipped ${skipped}, fenced ${fenced})`);
    console.log(`  result overhead p99    ${overheadP99}  (upstream answer → published)`);
    console.log(
      `  results at the clients ${got} of ${Math.round(expected)} expected (${((got / expected) * 100).toFixed(1)} %), ` +
        `${dups} duplicate ids in the whole run, ${after.counts.failures - before.counts.failures} not ok; sockets open ${after.counts.open}/${streams}; ` +
        `keepalives ${after.counts.keepalives - before.counts.keepalives} (${after.counts.keepaliveFailures} failed in all)`,
    );
    console.log(
      `  RSS per stream         ${rssPerStream.map((kb, i) => `${reps[i]!.id} ${kb.toFixed(1)} KiB`).join(', ')} ` +
        `(mean RSS idle → loaded: ${reps.map((r, i) => `${mib(idleRss[i]!)} → ${mib(rss[i]!)}`).join(', ')})`,
    );
    console.log(
      `  of which per stream    V8 heap in use ${gaugePerStream(HEAP_USED).toFixed(1)} KiB (committed ${gaugePerStream(HEAP_TOTAL).toFixed(1)} KiB), external ${gaugePerStream(EXTERNAL).toFixed(1)} KiB (idle → end of the measurement)`,
    );
    console.log(
      `  store calls            ${(callsTotal / streamSeconds).toFixed(3)} per stream-second: ${perSecond(calls, streamSeconds)}`,
    );
    let redisPerStreamSecond: number | undefined;
    if (before.commands && after.commands) {
      // The bench's own INFO calls are not the fleet's.
      const cmds = commandDeltas(before.commands, after.commands).filter(([name]) => name !== 'info');
      const total = cmds.reduce((k, [, n]) => k + n, 0);
      redisPerStreamSecond = total / streamSeconds;
      console.log(
        `  Redis commands         ${redisPerStreamSecond.toFixed(3)} per stream-second (${(total / wall).toFixed(0)}/s; script inner calls included)`,
      );
      console.log(`    by command           ${perSecond(cmds, streamSeconds, 16)}`);
    }
    if (before.perPrimary && after.perPrimary) {
      const totals = after.perPrimary.map((m, i) =>
        commandDeltas(before.perPrimary![i]!, m)
          .filter(([name]) => name !== 'info')
          .reduce((k, [, n]) => k + n, 0),
      );
      const mean = totals.reduce((k, n) => k + n, 0) / totals.length;
      const spread = Math.max(...totals.map((n) => Math.abs(n / mean - 1))) * 100;
      console.log(
        `  per primary            ${totals.map((n) => `${(n / wall).toFixed(0)}/s`).join(', ')} commands (widest ±${spread.toFixed(1)} % from the mean)`,
      );
    }
    const pct = (ms: number) => `${(ms / 10 / wall).toFixed(0)} %`;
    console.log(
      `  beside the gateway     upstream stub ${pct(after.upstreamMs - before.upstreamMs)} (${upstream.pids.length} workers), ` +
        `clients ${pct(after.clientsMs - before.clientsMs)}${store !== 'memory' ? `, redis-server${f.cluster ? 's' : ''} ${pct((after.redisCpu - before.redisCpu) * 1000)}` : ''}; ` +
        `load average ${os.loadavg()[0]!.toFixed(1)} on ${os.cpus().length} cores`,
    );
    return {
      label,
      streams,
      replicas,
      cpuMsPerStreamSecond: (cpu * 1000) / streamSeconds,
      peakPct,
      lateness,
      overheadP99,
      received: got / expected,
      duplicates: dups,
      rssKibPerStream: meanRssPerStream,
      heapKibPerStream: gaugePerStream(HEAP_USED),
      externalKibPerStream: gaugePerStream(EXTERNAL),
      redisPerStreamSecond,
    };
  } finally {
    progress('');
    // Clients delete their streams while the replicas still run, then everything stops.
    for (const c of clients) c.send('STOP');
    await Promise.all(clients.map((c) => lineOrExit(c, 'DONE', 60_000, 'client process').catch(() => undefined)));
    await Promise.all(clients.map((c) => c.kill()));
    stopping = true;
    // Node flags such as --cpu-prof write their output at a normal exit: the replicas drain first.
    if (replicaNodeArgs().length && fleet) {
      for (const r of fleet.replicas) r.kill('SIGTERM');
      await Promise.race([Promise.all(fleet.replicas.map((r) => r.proc.exited)), new Promise((res) => setTimeout(res, 30_000))]);
    }
    await fleet?.stop();
    await upstream.proc.kill();
  }
}

/**
 * The node flags every replica runs with: those of `npm start`, which test/deploy/image.test.ts
 * holds equal to the image's ENTRYPOINT (Dockerfile).
 */
const IMAGE_NODE_ARGS = (() => {
  const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { scripts: { start: string } };
  return pkg.scripts.start.split(/\s+/).filter((w) => w.startsWith('--'));
})();

/** BENCH_SCALE_NODE_ARGS: node flags for every replica (e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof`). */
function replicaNodeArgs(): string[] {
  return (process.env.BENCH_SCALE_NODE_ARGS ?? '').split(/\s+/).filter(Boolean);
}

export async function benchScale(cfg: Config, flags: BenchFlags = {}): Promise<void> {
  const env = process.env;
  const sizes = numbers((flags.streams as string | undefined) ?? env.BENCH_SCALE_STREAMS, [300], 'BENCH_SCALE_STREAMS');
  const replicaCounts = numbers((flags.replicas as string | undefined) ?? env.BENCH_SCALE_REPLICAS, [1, 3], 'BENCH_SCALE_REPLICAS');
  const redisStore = ((flags.store as string | undefined) ?? env.BENCH_SCALE_STORE ?? 'redis') as ScaleSetup['redisStore'];
  if (redisStore !== 'redis' && redisStore !== 'cluster') throw new Error(`--store ${String(redisStore)}: redis or cluster`);
  const one = (name: string, fallback: number) => numbers(env[name], [fallback], name)[0]!;
  const seconds = one('BENCH_SECONDS', 30);
  const perKey = one('BENCH_SCALE_PER_KEY', 5);
  const warmupSeconds = one('BENCH_SCALE_WARMUP_S', 5);
  const upstreamWorkers = one('BENCH_SCALE_UPSTREAM_WORKERS', Math.max(2, Math.ceil(os.cpus().length / 4)));
  const clkTck = Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100;
  // A Ctrl-C or SIGTERM still runs the exit handlers that kill every child.
  const onSignal = () => process.exit(130);
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  const rows: ScaleRow[] = [];
  try {
    for (const streams of sizes) {
      const note = fileLimitNote(streams);
      if (note) console.log(note);
      const clients = one('BENCH_SCALE_CLIENTS', Math.ceil(streams / 2500));
      for (const replicas of replicaCounts) {
        rows.push(await runSetup(cfg, { streams, replicas, seconds, perKey, upstreamWorkers, clients, warmupSeconds, redisStore }, clkTck));
      }
    }
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
  console.log(
    '\nsetup                                   CPU ms/stream-s  ÷ 1 process  ÷ 1 at N/R  peak %  lateness p50 / p99      overhead p99  received  dups  RSS KiB/stream  heap / ext KiB  Redis cmds/stream-s',
  );
  // The fleet's CPU per stream-second over one process's, when both ran: at the same size (the
  // ≤ 1.5× goal), and at one replica's share (N/R streams: the same streams per process, so what the
  // fleet's own work costs apart from a process's per-stream cost falling as it gets busier).
  const ratio = (r: ScaleRow, streams: number) => {
    const one = rows.find((o) => o.replicas === 1 && o.streams === streams);
    return one && r.replicas > 1 ? `${(r.cpuMsPerStreamSecond / one.cpuMsPerStreamSecond).toFixed(2)}×` : '–';
  };
  for (const r of rows) {
    console.log(
      `${r.label.padEnd(40)}${r.cpuMsPerStreamSecond.toFixed(3).padStart(15)}  ${ratio(r, r.streams).padStart(11)}  ${ratio(r, r.streams / r.replicas).padStart(10)}  ${r.peakPct.toFixed(0).padStart(6)}  ${r.lateness.padEnd(24)}${r.overheadP99.padStart(12)}  ` +
        `${(r.received * 100).toFixed(1).padStart(7)} %${String(r.duplicates).padStart(6)}${r.rssKibPerStream.toFixed(1).padStart(16)}  ${`${r.heapKibPerStream.toFixed(1)} / ${r.externalKibPerStream.toFixed(1)}`.padStart(14)}  ${r.redisPerStreamSecond?.toFixed(3) ?? '–'}`,
    );
  }
}

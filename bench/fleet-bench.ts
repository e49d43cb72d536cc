/**
 * `npm run bench fleet`: the fleet on real processes (fleet.ts: redis-server + the emulator + 3
 * replica CLIs). Prints
 *  - the failover gap a results socket on a survivor sees after SIGKILL of the owner (p50/p99 over
 *    BENCH_FLEET_FAILOVER streams at 1 Hz, default 24, 0 skips this and the drain; target ≤ 4 s
 *    p99), and duplicates;
 *  - drain handover: missed ticks per stream when the owner gets SIGTERM (target ≤ 1);
 *  - steady load, Redis store vs memory store in the same run (BENCH_FLEET_STREAMS over 3
 *    replicas at 1 Hz, default 150 because this 2-core machine also runs the emulator, Redis and
 *    the clients; the specified size is 1,000): replica CPU per stream-second, tick lateness p99
 *    (from each replica's /metrics histogram: an upper bucket bound), Redis commands per
 *    stream-second (INFO commandstats, which counts a script's inner calls).
 */
import type { Config } from '../src/config';
import { createStream, duplicateIds, missedTicks, startFleet } from '../test/helpers/fleet';
import { openResults } from '../test/helpers/results-socket';
import type { Fleet, FleetOptions } from '../test/helpers/fleet';
import type { ResultsSocket } from '../test/helpers/results-socket';
import { quantile } from '../test/helpers/util';
import { MAIN, bucketQuantile, commandDeltas, scrapeMetrics, seriesDelta, waitUntil } from './util';

const KEY = (cfg: Config) => `${cfg.brand}-local-dev`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const seconds = (ms: number) => `${(ms / 1000).toFixed(2)} s`;
const body = {
  mode: 'frame',
  processing: { interval_seconds: 1 },
  inference: { prompt: 'Describe the frame', model: 'local/analyzer-mini', max_output_tokens: 32 },
};

/** A create, retried a few times on 503 (a loaded 2-core machine: the emulator may shed a create). */
async function create(url: string, key: string): Promise<string> {
  for (let attempt = 0; ; attempt++) {
    const c = await createStream(url, key, body);
    if (c.id) return c.id;
    if (c.status !== 503 || attempt >= 5) throw new Error(`create answered ${c.status}: ${JSON.stringify(c.body)}`);
    await sleep(500 * (attempt + 1));
  }
}

function fleetOptions(streams: number, over: Partial<FleetOptions> = {}): FleetOptions {
  return {
    main: MAIN,
    logLevel: 'warn',
    keepLines: false,
    // A lease longer than the run: the bench sends no keepalives (one per stream every 22 s at
    // the default 45 s lease would add under 0.05 calls per stream-second).
    env: { LEGACY_MAX_STREAMS_PER_KEY: String(streams + 10), LEGACY_LEASE_TTL_SECONDS: '3600' },
    config: { legacy: { firstFramePollMs: 200 } },
    publisher: { fps: 1, width: 64, height: 48 },
    ...over,
  };
}

/** Creates `n` streams on `on`, a socket for each on the other replicas; resolves once each has results. */
async function streamsWithSockets(fleet: Fleet, cfg: Config, n: number, on: string): Promise<ResultsSocket[]> {
  const owner = fleet.replica(on);
  const others = fleet.replicas.filter((r) => r.id !== on);
  const sockets: ResultsSocket[] = [];
  for (let i = 0; i < n; i++) {
    const id = await create(owner.url, KEY(cfg));
    sockets.push(await openResults(others[i % others.length]!.url, id, KEY(cfg)));
  }
  await waitUntil(() => sockets.every((s) => s.received.length >= 3), 60_000);
  return sockets;
}

/** A 3-replica fleet with BENCH_FLEET_FAILOVER streams owned by `owner`, sockets elsewhere; stopped after `run`. */
async function withOwnedStreams(
  cfg: Config,
  owner: string,
  run: (fleet: Fleet, sockets: ResultsSocket[], n: number) => Promise<void>,
): Promise<void> {
  const n = Number(process.env.BENCH_FLEET_FAILOVER ?? 24);
  const fleet = await startFleet(fleetOptions(n));
  try {
    const sockets = await streamsWithSockets(fleet, cfg, n, owner);
    await run(fleet, sockets, n);
    for (const s of sockets) s.close();
  } finally {
    await fleet.stop();
  }
}

function benchFailover(cfg: Config): Promise<void> {
  return withOwnedStreams(cfg, 'A', async (fleet, sockets, n) => {
    const killedAt = Date.now();
    fleet.replica('A').kill('SIGKILL');
    const resumed = await waitUntil(() => sockets.every((s) => s.received.some((r) => r.atMs > killedAt)), 60_000);
    await sleep(3000);
    const gaps = sockets.map((s) => {
      const before = s.received.filter((r) => r.atMs <= killedAt).at(-1)?.atMs ?? killedAt;
      const after = s.received.find((r) => r.atMs > killedAt)?.atMs;
      return after === undefined ? Infinity : after - before;
    });
    const dups = sockets.reduce((k, s) => k + duplicateIds(s.received).length, 0);
    console.log(`failover after SIGKILL of the owner, ${n} streams at 1 Hz, sockets on the survivors:`);
    console.log(
      `  gap (last result before → first after)  p50 ${seconds(quantile(gaps, 0.5))}  p99 ${seconds(quantile(gaps, 0.99))}  max ${seconds(Math.max(...gaps))}` +
        `${resumed ? '' : '  (some streams never resumed within 60 s)'}`,
    );
    console.log(`  duplicate result ids ${dups}; sockets still open ${sockets.filter((s) => s.isOpen()).length}/${n}`);
  });
}

function benchDrain(cfg: Config): Promise<void> {
  return withOwnedStreams(cfg, 'B', async (fleet, sockets, n) => {
    const termAt = Date.now();
    const b = fleet.replica('B');
    b.kill('SIGTERM');
    const exit = await Promise.race([b.proc.exited.then((e) => ({ ...e, ms: Date.now() - termAt })), sleep(30_000).then(() => undefined)]);
    await waitUntil(() => sockets.every((s) => s.received.filter((r) => r.atMs > termAt).length >= 4), 30_000);
    const missed = sockets.map((s) => missedTicks(s.received, s.streamId).length);
    const dups = sockets.reduce((k, s) => k + duplicateIds(s.received).length, 0);
    console.log(
      `drain (SIGTERM of the owner), ${n} streams at 1 Hz: ${exit ? `exit ${exit.code ?? exit.signal} after ${seconds(exit.ms)}` : 'no exit within 30 s'}`,
    );
    console.log(
      `  missed ticks per stream  p50 ${quantile(missed, 0.5)}  max ${Math.max(...missed)}; duplicates ${dups}; sockets open ${sockets.filter((s) => s.isOpen()).length}/${n}`,
    );
  });
}

const LATENESS = 'gateway_legacy_tick_lateness_seconds';

/** The lateness quantile between two scrapes of every replica's /metrics, and the ticks behind it. */
function latenessQuantile(before: Map<string, number>, after: Map<string, number>, q: number): string {
  return `${bucketQuantile(before, after, LATENESS, q)} (${seriesDelta(before, after, `${LATENESS}_count`)} ticks)`;
}

async function benchLoad(cfg: Config, store: 'redis' | 'memory', streams: number, secs: number): Promise<void> {
  const fleet = await startFleet(fleetOptions(streams, { store }));
  try {
    const sockets: ResultsSocket[] = [];
    for (let i = 0; i < streams; i += 10) {
      // Ten creates in flight, spread over the replicas; the socket on the next replica.
      await Promise.all(
        Array.from({ length: Math.min(10, streams - i) }, async (_, j) => {
          const k = i + j;
          const on = fleet.replicas[k % 3]!;
          const id = await create(on.url, KEY(cfg));
          // With the memory store each replica is its own fleet: the socket goes to the creator.
          sockets.push(await openResults((store === 'redis' ? fleet.replicas[(k + 1) % 3]! : on).url, id, KEY(cfg)));
        }),
      );
    }
    await waitUntil(() => sockets.every((s) => s.received.length >= 2), 60_000);
    await sleep(3000);
    const cpu0 = fleet.replicas.map((r) => r.cpuSeconds());
    const lat0 = await scrapeMetrics(fleet.replicas.map((r) => r.url));
    const cmd0 = store === 'redis' ? await fleet.redisCommands() : new Map<string, number>();
    const got0 = sockets.reduce((k, s) => k + s.received.length, 0);
    const t0 = Date.now();
    await sleep(secs * 1000);
    const wall = (Date.now() - t0) / 1000;
    const cpu = fleet.replicas.reduce((k, r, i) => k + r.cpuSeconds() - cpu0[i]!, 0);
    const lat1 = await scrapeMetrics(fleet.replicas.map((r) => r.url));
    const cmd1 = store === 'redis' ? await fleet.redisCommands() : new Map<string, number>();
    const perCmd = commandDeltas(cmd0, cmd1);
    const cmds = perCmd.reduce((k, [, n]) => k + n, 0);
    const got = sockets.reduce((k, s) => k + s.received.length, 0) - got0;
    const streamSeconds = streams * wall;
    console.log(
      `${store} store: ${streams} streams at 1 Hz over 3 replicas for ${wall.toFixed(1)} s (${sockets.filter((s) => s.isOpen()).length} sockets open)`,
    );
    console.log(`  results/s received     ${(got / wall).toFixed(0)}`);
    console.log(
      `  replica CPU            ${((cpu / wall) * 100).toFixed(0)} % of one core in all → ${((cpu * 1000) / streamSeconds).toFixed(3)} ms CPU per stream-second`,
    );
    console.log(`  tick lateness p50      ${latenessQuantile(lat0, lat1, 0.5)}`);
    console.log(`  tick lateness p99      ${latenessQuantile(lat0, lat1, 0.99)}`);
    if (store === 'redis') {
      console.log(
        `  Redis commands         ${(cmds / wall).toFixed(0)}/s → ${(cmds / streamSeconds).toFixed(2)} per stream-second (script inner calls included)`,
      );
      console.log(
        `    by command           ${perCmd
          .slice(0, 8)
          .map(([name, n]) => `${name} ${(n / streamSeconds).toFixed(2)}`)
          .join(', ')}`,
      );
    }
    for (const s of sockets) s.close();
  } finally {
    await fleet.stop();
  }
}

export async function benchFleet(cfg: Config): Promise<void> {
  // BENCH_FLEET_FAILOVER=0: the steady load only.
  if (Number(process.env.BENCH_FLEET_FAILOVER ?? 24) > 0) {
    await benchFailover(cfg);
    await benchDrain(cfg);
  }
  const streams = Number(process.env.BENCH_FLEET_STREAMS ?? 150);
  const secs = Number(process.env.BENCH_SECONDS ?? 20);
  console.log(
    `steady load (BENCH_FLEET_STREAMS=${streams}; the specified 1,000 saturates a 2-core machine with the emulator and Redis on it):`,
  );
  await benchLoad(cfg, 'redis', streams, secs);
  await benchLoad(cfg, 'memory', streams, secs);
}

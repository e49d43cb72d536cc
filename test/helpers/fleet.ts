/**
 * A fleet of real processes on loopback, shared by the fleet suites (test/gateway/fleet) and the `fleet`
 * bench: a redis-server (redis.ts), the emulator (the CLI's `emulator` command) and N gateway
 * replicas (the CLI's `serve`, env REDIS_URL / GATEWAY_ID / GATEWAY_SECRET / UPSTREAM_URL / PORT).
 * Each replica can be signalled (SIGKILL, SIGSTOP, SIGCONT, SIGTERM, SIGINT) and restarted on its port;
 * Redis can be paused (SIGSTOP) and restarted with or without its data (`redisArgs` adds e.g. AOF);
 * the emulator takes extra config (`emulatorConfig`: more accounts). `stop()` ends everything,
 * and node-process.ts / redis.ts SIGKILL whatever is left when this process exits. Processes bind
 * port 0 and name the port they got in their "listening" log line (a port probed free and bound
 * later by another process can be taken in between); a replica restarts on the port it had. At a
 * log level that does not print that line (a bench's `warn`), replicas get a probed free port.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Redis from 'ioredis';
import { mergeDeep } from '../../src/config';
import { resultId } from '../../src/gateway/legacy/streams/results-channel';
import { runNode } from './node-process';
import type { NodeProcess } from './node-process';
import { commandCalls, serverCommandCalls, startRedis, startRedisCluster } from './redis';
import type { RedisCluster, RedisServer } from './redis';
import { startSentinelSet } from './sentinel';
import type { SentinelSet } from './sentinel';
import { parseSentinelUrl } from '../../src/lib/redis-url';
import type { Received } from './results-socket';
import { ROOT, freePort } from './util';
import { sleep } from './time';

export type Signal = 'SIGKILL' | 'SIGSTOP' | 'SIGCONT' | 'SIGTERM' | 'SIGINT';

export interface FleetOptions {
  /** The CLI entry: a test's esbuild bundle, or dist/main.js for the bench. */
  main: string;
  /** Replica ids (GATEWAY_ID); default A, B, C. */
  ids?: string[];
  /**
   * 'memory': no Redis; every replica is a fleet of one (the bench's baseline). 'sentinel': a
   * primary, two replicas and three sentinels (`redis+sentinel://`; `fleet.sentinel` fails it over).
   * 'cluster': a 3-primary Redis Cluster (`redis+cluster://`; `fleet.cluster` names its nodes).
   */
  store?: 'redis' | 'memory' | 'sentinel' | 'cluster';
  /** Extra env for every replica (LEGACY_LEASE_TTL_SECONDS, …). */
  env?: Record<string, string>;
  /** Env of one replica, given the fleet's Redis and upstream URLs (a replica reaching one through a fault proxy). */
  replicaEnv?: (
    id: string,
    fleet: { redisUrl: string | undefined; upstreamUrl: string },
  ) => Record<string, string> | Promise<Record<string, string>>;
  /** Config file layered over the defaults for every replica (`serve --config`). */
  config?: Record<string, unknown>;
  /**
   * The emulator's synthetic publisher on every stream (fps, frame size); false: none (webrtc
   * streams get their media from the client's relay; `fleet.publish` starts one per stream).
   */
  publisher?: PublisherOptions | false;
  /** Extra env for the emulator (BRAND, so its keys and header follow the replicas' brand). */
  emulatorEnv?: Record<string, string>;
  logLevel?: string;
  /** Keep each replica's parsed log lines (tests: yes; a long bench: no). */
  keepLines?: boolean;
  /** Extra node flags for the replicas (e.g. --max-old-space-size). */
  nodeArgs?: string[];
  /** Every log line of every replica as it comes (with `keepLines: false`, a long run still sees the few it needs). */
  onLine?: (replicaId: string, line: Record<string, unknown>) => void;
  /** Extra redis-server arguments (e.g. `--appendonly yes`: a restart then reloads the AOF). */
  redisArgs?: string[];
  /** Emulator config layered over config/default.json (extra accounts, …). */
  emulatorConfig?: Record<string, unknown>;
}

export interface PublisherOptions {
  fps: number;
  width: number;
  height: number;
}

/** An upstream stream as the emulator's control API lists it (`/_emulator/state`: active streams). */
export interface UpstreamStream {
  id: string;
  state: string;
  /** The synthetic publisher runs on it. */
  publishing: boolean;
  last_frame_index: number | null;
  recent_fps: number;
}

export interface Replica {
  id: string;
  port: number;
  url: string;
  /** The current process (a new one after restart()). */
  proc: NodeProcess;
  /** Log lines of every process this replica has run, oldest first. */
  lines: Record<string, unknown>[];
  /** Resolves with the first line of the current process whose msg starts with `prefix`. */
  line(prefix: string): Promise<Record<string, unknown>>;
  kill(signal: Signal): void;
  running(): boolean;
  /** Starts a new process with the same id and port (after it exited, or SIGKILLs it first). */
  restart(): Promise<void>;
  /** User + system CPU seconds of the current process so far (/proc). */
  cpuSeconds(): number;
}

export interface Fleet {
  /** The one redis-server (store 'redis'); the first primary of a Sentinel set. */
  redis: RedisServer | undefined;
  /** The Sentinel set (store 'sentinel'). */
  sentinel: SentinelSet | undefined;
  /** The Redis Cluster (store 'cluster'); `redis` is then its first node. */
  cluster: RedisCluster | undefined;
  emulatorUrl: string;
  /** The emulator's process (signal it to take the upstream away). */
  emulator: NodeProcess;
  replicas: Replica[];
  replica(id: string): Replica;
  /**
   * Starts one more replica on a fresh port (a rolling deploy's new process, or a replacement after
   * a crash): the old one may still hold its own port while it drains. Listed in `replicas`.
   */
  addReplica(id: string): Promise<Replica>;
  /** The emulator's active upstream streams. */
  upstreamStreams(): Promise<UpstreamStream[]>;
  /** Starts the emulator's synthetic publisher on one stream (default: the fleet's publisher settings). */
  publish(streamId: string, opts?: PublisherOptions): Promise<void>;
  /** The stream record as the store holds it (fields JSON-decoded), or undefined. */
  session(streamId: string): Promise<Record<string, unknown> | undefined>;
  /** A command on the fleet's Redis (one shared client; fails while Redis is away). */
  redisCall(...args: (string | number)[]): Promise<unknown>;
  /** `calls` per command from INFO commandstats (Redis counts a script's inner calls too); a Cluster's summed over its nodes. */
  redisCommands(): Promise<Map<string, number>>;
  stop(): Promise<void>;
}

/** The synthetic publisher's default: 10 fps of small frames. */
const DEFAULT_PUBLISHER: PublisherOptions = { fps: 10, width: 160, height: 120 };

const FLEET_SECRET = 'fleet-harness-secret-0123456789abcdef';

const BASE_ENV = () => ({ PATH: process.env.PATH, NODE_PATH: process.env.NODE_PATH ?? path.join(ROOT, 'node_modules') });

/**
 * The repository's config/default.json: a bundle in a temp dir does not find it beside itself, so
 * every process gets it (merged with the fleet's own settings) through `--config`.
 */
const DEFAULTS_FILE = path.join(ROOT, 'config', 'default.json');

const CLK_TCK = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()) || 100;

function cpuSecondsOf(pid: number | undefined): number {
  if (!pid) return 0;
  try {
    // Fields after the parenthesised command name: utime and stime are the 12th and 13th.
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12])) / CLK_TCK;
  } catch {
    return 0;
  }
}

/** The port a process bound, from its first log line starting with `prefix` (which carries `port`). */
async function listeningPort(proc: NodeProcess, prefix: string, what: string, timeoutMs = 30_000): Promise<number> {
  const line = proc.line(prefix);
  let timer: NodeJS.Timeout | undefined;
  try {
    const port = await Promise.race([
      line.then((l) => Number(l.port)),
      proc.exited.then((e) =>
        Promise.reject(new Error(`${what} exited (${e.code ?? e.signal}) before it listened: ${proc.stderr().slice(-2000)}`)),
      ),
      new Promise<never>(
        (_, reject) =>
          (timer = setTimeout(
            () => reject(new Error(`${what} not listening after ${timeoutMs} ms: ${proc.stderr().slice(-2000)}`)),
            timeoutMs,
          )),
      ),
    ]);
    if (!Number.isInteger(port) || port <= 0) throw new Error(`${what} logged no port in its "${prefix}" line`);
    return port;
  } catch (err) {
    proc.child.kill('SIGKILL');
    throw err;
  } finally {
    clearTimeout(timer);
  }
}

/** Waits until `url` answers 2xx, or fails with the process's stderr when it exits first. */
async function healthy(url: string, proc: NodeProcess, what: string, timeoutMs = 30_000): Promise<void> {
  let exited: { code: number | null; signal: string | null } | undefined;
  void proc.exited.then((e) => (exited = e));
  for (const until = Date.now() + timeoutMs; Date.now() < until; await sleep(50)) {
    if (exited) throw new Error(`${what} exited (${exited.code ?? exited.signal}) before it was healthy: ${proc.stderr().slice(-2000)}`);
    const ok = await fetch(url).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) return;
  }
  proc.child.kill('SIGKILL');
  throw new Error(`${what} not healthy at ${url} after ${timeoutMs} ms: ${proc.stderr().slice(-2000)}`);
}

function stopProc(proc: NodeProcess): Promise<unknown> {
  if (proc.child.exitCode !== null || proc.child.signalCode !== null) return Promise.resolve();
  proc.child.kill('SIGKILL');
  return proc.exited;
}

export async function startFleet(opts: FleetOptions): Promise<Fleet> {
  const started: NodeProcess[] = [];
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-fleet-'));
  let redis: RedisServer | undefined;
  let sentinel: SentinelSet | undefined;
  let cluster: RedisCluster | undefined;
  let client: Redis | undefined;
  const replicas: Replica[] = [];
  const stop = async () => {
    client?.disconnect();
    await Promise.all(replicas.map((r) => stopProc(r.proc)));
    await Promise.all(started.map(stopProc));
    await (sentinel ? sentinel.stop() : cluster ? cluster.stop() : redis?.stop());
    fs.rmSync(dir, { recursive: true, force: true });
  };
  try {
    if (opts.store === 'sentinel') {
      sentinel = await startSentinelSet();
      redis = sentinel.nodes[0];
    } else if (opts.store === 'cluster') {
      cluster = await startRedisCluster(3);
      redis = cluster.nodes[0];
    } else if (opts.store !== 'memory') redis = await startRedis(['--maxmemory-policy', 'noeviction', ...(opts.redisArgs ?? [])]);
    const redisUrl = sentinel?.url ?? cluster?.url ?? redis?.url;
    const pub = opts.publisher === false ? undefined : (opts.publisher ?? DEFAULT_PUBLISHER);
    const defaults = JSON.parse(fs.readFileSync(DEFAULTS_FILE, 'utf8')) as Record<string, unknown>;
    const layered = (name: string, over: Record<string, unknown> | undefined) => {
      const file = path.join(dir, name);
      fs.writeFileSync(file, JSON.stringify(mergeDeep(defaults, over ?? {})));
      return file;
    };
    const emulator = runNode(
      opts.main,
      ['emulator', '--config', layered('emulator.json', opts.emulatorConfig)],
      {
        ...BASE_ENV(),
        EMULATOR_PORT: '0',
        EMULATOR_HOST: '127.0.0.1',
        EMULATOR_CONTROL_API: 'true',
        EMULATOR_AUTO_PUBLISH: String(pub !== undefined),
        ...(pub && {
          EMULATOR_AUTO_PUBLISH_FPS: String(pub.fps),
          EMULATOR_AUTO_PUBLISH_WIDTH: String(pub.width),
          EMULATOR_AUTO_PUBLISH_HEIGHT: String(pub.height),
        }),
        // Info: its "emulator listening" line names the port (it logs little else at this level).
        LOG_LEVEL: 'info',
        ...opts.emulatorEnv,
      },
      { keepLines: false, keepText: false },
    );
    started.push(emulator);
    const emulatorUrl = `http://127.0.0.1:${await listeningPort(emulator, 'emulator listening', 'emulator')}`;
    await healthy(`${emulatorUrl}/healthz`, emulator, 'emulator');

    const configFile = layered('replica.json', opts.config);
    const logLevel = opts.logLevel ?? 'info';
    const announcesPort = ['info', 'debug', 'trace'].includes(logLevel);
    const replicaPort = async () => (announcesPort ? undefined : await freePort());
    for (const id of opts.ids ?? ['A', 'B', 'C']) replicas.push(await startReplica(id, await replicaPort()));

    /** `port` undefined: port 0, and the one the process got from then on (restarts keep it). */
    async function startReplica(id: string, port: number | undefined): Promise<Replica> {
      const lines: Record<string, unknown>[] = [];
      const own = (await opts.replicaEnv?.(id, { redisUrl, upstreamUrl: emulatorUrl })) ?? {};
      const launch = async () => {
        const proc = runNode(
          opts.main,
          ['serve', '--config', configFile],
          {
            ...BASE_ENV(),
            ...(redisUrl ? { REDIS_URL: redisUrl, GATEWAY_SECRET: FLEET_SECRET } : {}),
            GATEWAY_ID: id,
            UPSTREAM_URL: emulatorUrl,
            PORT: String(port ?? 0),
            HOST: '127.0.0.1',
            LOG_LEVEL: logLevel,
            ...opts.env,
            ...own,
          },
          // One list across restarts, beside the current process's own.
          {
            keepText: false,
            keepLines: opts.keepLines,
            nodeArgs: opts.nodeArgs,
            onLine: (l) => {
              if (opts.keepLines !== false) lines.push(l);
              opts.onLine?.(id, l);
            },
          },
        );
        port ??= await listeningPort(proc, 'gateway listening', `replica ${id}`);
        await healthy(`http://127.0.0.1:${port}/healthz`, proc, `replica ${id}`);
        return proc;
      };
      const proc = await launch();
      const bound = port!;
      const r: Replica = {
        id,
        port: bound,
        url: `http://127.0.0.1:${bound}`,
        proc,
        lines,
        line: (prefix) => r.proc.line(prefix),
        kill: (signal) => void r.proc.child.kill(signal),
        running: () => r.proc.child.exitCode === null && r.proc.child.signalCode === null,
        async restart() {
          await stopProc(r.proc);
          r.proc = await launch();
        },
        cpuSeconds: () => cpuSecondsOf(r.proc.child.pid),
      };
      return r;
    }

    const redisClient = () => {
      if (!redis) throw new Error('this fleet runs on the memory store: no Redis');
      // Fails fast while Redis is away (no offline queue, 1 s per command), reconnects after.
      if (!client) {
        const options = { enableOfflineQueue: false, commandTimeout: 1000, maxRetriesPerRequest: 0, retryStrategy: () => 100 };
        const viaSentinel = sentinel && parseSentinelUrl(sentinel.url);
        client = viaSentinel
          ? new Redis({ ...options, sentinels: viaSentinel.nodes, name: viaSentinel.name, failoverDetector: true })
          : new Redis(redis.url, options);
        client.on('error', () => undefined); // while Redis is away on purpose; calls fail on their own
      }
      return client;
    };
    const waitReady = async (c: Redis) => {
      for (const until = Date.now() + 5000; c.status !== 'ready' && Date.now() < until;) await sleep(20);
    };
    return {
      redis,
      sentinel,
      cluster,
      emulatorUrl,
      emulator,
      replicas,
      replica: (id) => {
        const r = replicas.find((x) => x.id === id);
        if (!r) throw new Error(`no replica ${id}`);
        return r;
      },
      async addReplica(id) {
        if (replicas.some((x) => x.id === id)) throw new Error(`replica ${id} exists already`);
        const r = await startReplica(id, await replicaPort());
        replicas.push(r);
        return r;
      },
      async upstreamStreams() {
        const res = await fetch(`${emulatorUrl}/_emulator/state`);
        if (!res.ok) throw new Error(`emulator state answered ${res.status}`);
        return ((await res.json()) as { streams: UpstreamStream[] }).streams;
      },
      async publish(streamId, over) {
        const res = await fetch(`${emulatorUrl}/_emulator/streams/${streamId}/publisher`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(over ?? pub ?? DEFAULT_PUBLISHER),
        });
        if (res.status !== 201) throw new Error(`emulator publisher for ${streamId} answered ${res.status}: ${await res.text()}`);
      },
      async redisCall(...args) {
        const c = redisClient();
        await waitReady(c);
        return c.call(String(args[0]), ...args.slice(1).map(String));
      },
      async session(streamId) {
        const c = redisClient();
        await waitReady(c);
        const h = await c.hgetall(`lg:session:{${streamId}}`);
        if (Object.keys(h).length === 0) return undefined;
        return Object.fromEntries(Object.entries(h).map(([k, v]) => [k, JSON.parse(v) as unknown]));
      },
      async redisCommands() {
        if (cluster) {
          const sum = new Map<string, number>();
          for (const perNode of await Promise.all(cluster.nodes.map(serverCommandCalls))) {
            for (const [name, n] of perNode) sum.set(name, (sum.get(name) ?? 0) + n);
          }
          return sum;
        }
        const c = redisClient();
        await waitReady(c);
        const info = await c.info('commandstats');
        return commandCalls(info);
      },
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** Result ids seen more than once (a result published twice). */
export function duplicateIds(received: readonly Received[]): string[] {
  const seen = new Set<string>();
  const dups = new Set<string>();
  for (const r of received) (seen.has(r.id) ? dups : seen).add(r.id);
  return [...dups];
}

/** The longest time between two consecutive results at or after `fromMs` (ms). */
export function longestGap(received: readonly Received[], fromMs: number): number {
  const times = received.map((r) => r.atMs).filter((t) => t >= fromMs);
  let gap = 0;
  for (let i = 1; i < times.length; i++) gap = Math.max(gap, times[i]! - times[i - 1]!);
  return gap;
}

/**
 * The tick each result id names (-1: none of the first `maxTick`): a result's id is
 * `resultId(streamId, tick)`, so this is exact however late a loaded machine delivered it.
 */
export function tickNumbers(ids: readonly string[], streamId: string, maxTick = 100_000): number[] {
  const wanted = new Set(ids);
  const tickOf = new Map<string, number>();
  for (let n = 0; n <= maxTick && tickOf.size < wanted.size; n++) {
    const id = resultId(streamId, n);
    if (wanted.has(id)) tickOf.set(id, n);
  }
  return ids.map((id) => tickOf.get(id) ?? -1);
}

/** Ticks missing between the first and last result received (each result's tick from its id, not from when it arrived). */
export function missedTicks(received: readonly Received[], streamId: string): number[] {
  const ticks = new Set(
    tickNumbers(
      received.map((r) => r.id),
      streamId,
    ).filter((n) => n >= 0),
  );
  if (ticks.size === 0) return [];
  const lo = Math.min(...ticks);
  const hi = Math.max(...ticks);
  const missing: number[] = [];
  for (let n = lo; n <= hi; n++) if (!ticks.has(n)) missing.push(n);
  return missing;
}

/**
 * The longest stretch of the stream's own schedule without a result, in ticks (1: none missed):
 * the gap a client sees, without the delivery delays a loaded machine adds to arrival times.
 */
export function longestTickGap(ids: readonly string[], streamId: string): number {
  const ticks = [...new Set(tickNumbers(ids, streamId))].sort((a, b) => a - b);
  if (ticks[0] === -1) throw new Error(`a result id of ${streamId} names no tick`);
  let gap = 0;
  for (let i = 1; i < ticks.length; i++) gap = Math.max(gap, ticks[i]! - ticks[i - 1]!);
  return gap;
}

/** POST /v0.2/streams on `baseUrl`; the stream id, or the answer when it is not 201. */
export async function createStream(baseUrl: string, key: string, body: unknown): Promise<{ status: number; id?: string; body: unknown }> {
  const res = await fetch(`${baseUrl}/v0.2/streams`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    /* not JSON */
  }
  const id = res.status === 201 ? (parsed as { stream_id: string }).stream_id : undefined;
  return { status: res.status, id, body: parsed };
}

/**
 * A real `redis-server` for a test file or a bench (never a mock in its place): its own loopback
 * port and temp dir, no persistence. Missing `redis-server` is an error saying how to install it
 * (`.ci/run` does): a test fails, it never skips.
 */
import { spawn, spawnSync } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { sleep } from './time';
import { freePort } from './util';

export interface RedisServer {
  url: string;
  port: number;
  /** Sends one command with redis-cli semantics over a raw socket (inline protocol); the reply line. */
  command(...args: string[]): Promise<string>;
  /** SIGSTOP / SIGCONT: the server keeps its sockets open but answers nothing (a stall, not a crash). */
  pause(): void;
  resume(): void;
  /**
   * Stops the process and starts a new one on the same port: `keepData` saves an RDB snapshot
   * first and the new process loads it (a restart with its data); otherwise it starts empty.
   */
  restart(opts: { keepData: boolean }): Promise<void>;
  /** SIGKILL: the process dies at once, its port closed (a crashed primary). */
  kill(): Promise<void>;
  /** Starts a killed server again on its port, empty (a crashed node coming back). */
  revive(): Promise<void>;
  stop(): Promise<void>;
}

/** `calls` per command in an INFO commandstats reply (Redis counts a script's inner calls too). */
export function commandCalls(info: string): Map<string, number> {
  return new Map([...info.matchAll(/cmdstat_([^:]+):calls=(\d+)/g)].map((m) => [m[1]!, Number(m[2])]));
}

/** `calls` per command of one server since it started or its last CONFIG RESETSTAT. */
export async function serverCommandCalls(server: Pick<RedisServer, 'command'>): Promise<Map<string, number>> {
  return commandCalls(await server.command('INFO', 'commandstats'));
}

/** Processes started here and not yet stopped: killed when this process exits, even on a failure. */
const live = new Set<ChildProcess>();
process.once('exit', () => {
  for (const c of live) c.kill('SIGKILL');
});

/** One inline command on a fresh connection; resolves with the first reply chunk. */
export function rawCommand(port: number, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const sock = net.connect(port, '127.0.0.1');
    sock.once('error', reject);
    sock.setTimeout(2_000, () => sock.destroy(new Error('redis-server did not answer within 2 s')));
    sock.once('data', (d) => {
      sock.destroy();
      resolve(d.toString());
    });
    // A server that closes without a word (killed, or stopping as it accepted) settles it too:
    // callers poll with deadlines, and a promise left pending would hang them for good.
    sock.once('close', () => reject(new Error('redis-server closed the connection without answering')));
    sock.once('connect', () => sock.write(`${args.map((a) => `"${a.replace(/["\\]/g, '\\$&')}"`).join(' ')}\r\n`));
  });
}

interface Spawned {
  port: number;
  child: ChildProcess;
  exited: Promise<number | null>;
  dead(): boolean;
}

/** Starts redis-server on `fixedPort` or a free port with its data in `dir`; resolves once it answers PING. */
async function spawnRedis(dir: string, extraArgs: string[], fixedPort?: number): Promise<Spawned> {
  for (let attempt = 0; ; attempt++) {
    const port = fixedPort ?? (await freePort());
    const child: ChildProcess = spawn(
      'redis-server',
      ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, ...extraArgs],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    live.add(child);
    let log = '';
    child.stdout?.on('data', (d: Buffer) => (log += d.toString()));
    child.stderr?.on('data', (d: Buffer) => (log += d.toString()));
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => (live.delete(child), r(code))));
    let dead = false;
    void exited.then(() => (dead = true));
    let up = false;
    for (const until = Date.now() + 10_000; !dead && !up && Date.now() < until; await sleep(20)) {
      up = (await rawCommand(port, ['PING']).catch(() => '')).startsWith('+PONG');
    }
    if (!up && !dead) {
      child.kill('SIGKILL');
      throw new Error(`redis-server on port ${port} did not answer PING within 10 s: ${log}`);
    }
    if (!up) {
      // Lost the port to someone else between probing and binding: another one.
      if (attempt < 3 && fixedPort === undefined) continue;
      throw new Error(`redis-server did not start: ${log}`);
    }
    return { port, child, exited, dead: () => dead };
  }
}

/** `port`: a given one (a restart on the same address); otherwise a free one. */
export async function startRedis(extraArgs: string[] = [], fixedPort?: number): Promise<RedisServer> {
  const which = spawnSync('redis-server', ['--version'], { encoding: 'utf8' });
  if (which.error || which.status !== 0) {
    throw new Error(
      'redis-server not found on PATH: install it (Debian: apt-get install redis-server; .ci/run does) — these tests need a real Redis',
    );
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-redis-'));
  let current: Spawned;
  try {
    current = await spawnRedis(dir, extraArgs, fixedPort);
  } catch (err) {
    fs.rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  const port = current.port;
  const halt = async () => {
    if (!current.dead()) {
      current.child.kill('SIGCONT'); // a paused server cannot act on SIGTERM
      current.child.kill('SIGTERM');
    }
    await current.exited;
  };
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    command: (...args) => rawCommand(port, args),
    pause: () => void current.child.kill('SIGSTOP'),
    resume: () => void current.child.kill('SIGCONT'),
    async restart({ keepData }) {
      current.child.kill('SIGCONT');
      const dump = path.join(dir, 'dump.rdb');
      if (keepData) await rawCommand(port, ['SAVE']);
      else fs.rmSync(dump, { force: true });
      // SIGKILL: no shutdown save, so what the next process loads is exactly the snapshot (or nothing).
      current.child.kill('SIGKILL');
      await current.exited;
      // The new process loads dump.rdb from `dir` when there is one.
      current = await spawnRedis(dir, extraArgs, port);
    },
    async kill() {
      current.child.kill('SIGKILL');
      await current.exited;
    },
    async revive() {
      if (!current.dead()) throw new Error(`redis-server on port ${port} is running: kill it first`);
      fs.rmSync(path.join(dir, 'dump.rdb'), { force: true });
      current = await spawnRedis(dir, extraArgs, port);
    },
    async stop() {
      await halt();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

export interface RedisCluster {
  /** `redis+cluster://127.0.0.1:p1,127.0.0.1:p2,…` (what REDIS_URL takes for a Cluster). */
  url: string;
  nodes: RedisServer[];
  stop(): Promise<void>;
}

/**
 * A local Redis Cluster of `size` primaries, no replicas (`redis-cli --cluster create`), ready when
 * every node reports `cluster_state:ok` (slots assigned and gossip settled).
 */
export async function startRedisCluster(size = 3): Promise<RedisCluster> {
  const nodes: RedisServer[] = [];
  const stop = async () => {
    await Promise.all(nodes.map((n) => n.stop()));
  };
  try {
    for (let i = 0; i < size; i++) {
      // The bus port defaults to port + 10000, which may be taken or out of range: a free one.
      const bus = String(await freePort());
      nodes.push(
        await startRedis([
          '--cluster-enabled',
          'yes',
          '--cluster-config-file',
          'nodes.conf',
          '--cluster-node-timeout',
          '5000',
          '--cluster-port',
          bus,
        ]),
      );
    }
    const create = spawnSync(
      'redis-cli',
      ['--cluster', 'create', ...nodes.map((n) => `127.0.0.1:${n.port}`), '--cluster-replicas', '0', '--cluster-yes'],
      {
        encoding: 'utf8',
        timeout: 30_000,
      },
    );
    if (create.error || create.status !== 0)
      throw new Error(`redis-cli --cluster create failed: ${create.error?.message ?? ''}${create.stdout}${create.stderr}`);
    for (const until = Date.now() + 20_000; ; await sleep(50)) {
      const states = await Promise.all(nodes.map((n) => n.command('CLUSTER', 'INFO').catch(() => '')));
      if (states.every((s) => s.includes('cluster_state:ok'))) break;
      if (Date.now() > until) throw new Error(`Redis Cluster not ok within 20 s: ${states.join(' | ')}`);
    }
  } catch (err) {
    await stop();
    throw err;
  }
  return { url: `redis+cluster://${nodes.map((n) => `127.0.0.1:${n.port}`).join(',')}`, nodes, stop };
}

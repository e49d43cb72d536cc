/**
 * Redis made highly available the way operators run it: one primary, replicas, and three
 * sentinels that watch it and promote a replica when it dies (real `redis-server` processes, the
 * sentinels started with `--sentinel`; Debian's `redis-sentinel` package installs the same binary).
 * A failover here is what production sees: replication is asynchronous, so a write the old primary
 * acknowledged may be missing on the promoted replica.
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { rawCommand, startRedis } from './redis';
import type { RedisServer } from './redis';
import { sleep } from './time';
import { freePort } from './util';

export interface SentinelSet {
  /** `redis+sentinel://127.0.0.1:s1,127.0.0.1:s2,127.0.0.1:s3/<name>` (what REDIS_URL takes). */
  url: string;
  /** The master name the sentinels watch. */
  name: string;
  /** Every data node, the first the initial primary. */
  nodes: RedisServer[];
  /** The data node the sentinels name primary now. */
  primary(): Promise<RedisServer>;
  /**
   * SIGKILLs the primary and waits until the sentinels have promoted another node and that node
   * answers as a primary. Resolves with the killed node and the new primary.
   */
  failover(): Promise<{ old: RedisServer; primary: RedisServer }>;
  /** Starts a killed node again; the sentinels make it a replica of the current primary (waited for). */
  rejoin(node: RedisServer): Promise<void>;
  /** SIGSTOP / SIGCONT of every sentinel: a client asking them for the primary waits meanwhile. */
  pauseSentinels(): void;
  resumeSentinels(): void;
  stop(): Promise<void>;
}

const live = new Set<ChildProcess>();
process.once('exit', () => {
  for (const c of live) c.kill('SIGKILL');
});

/** The primary's port as sentinel `port` reports it (undefined while it knows none). */
async function askedPrimaryPort(port: number, name: string): Promise<number | undefined> {
  const reply = await rawCommand(port, ['SENTINEL', 'get-master-addr-by-name', name]).catch(() => '');
  const m = /\r\n\$\d+\r\n[^\r]+\r\n\$\d+\r\n(\d+)\r\n/.exec(reply);
  return m ? Number(m[1]) : undefined;
}

async function until<T>(what: string, ms: number, probe: () => Promise<T | undefined>): Promise<T> {
  for (const end = Date.now() + ms; ; await sleep(50)) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`${what} within ${ms} ms`);
  }
}

async function startSentinel(
  dir: string,
  name: string,
  primaryPort: number,
  downAfterMs: number,
): Promise<{ port: number; child: ChildProcess; exited: Promise<unknown> }> {
  const port = await freePort();
  const conf = path.join(dir, `sentinel-${port}.conf`);
  // The sentinel rewrites its own config (state, other sentinels): a writable file of its own.
  fs.writeFileSync(
    conf,
    [
      `port ${port}`,
      'bind 127.0.0.1',
      `dir ${dir}`,
      `sentinel monitor ${name} 127.0.0.1 ${primaryPort} 2`,
      `sentinel down-after-milliseconds ${name} ${downAfterMs}`,
      `sentinel failover-timeout ${name} ${downAfterMs * 4}`,
      `sentinel parallel-syncs ${name} 1`,
      '',
    ].join('\n'),
  );
  const child = spawn('redis-server', [conf, '--sentinel'], { stdio: 'ignore' });
  live.add(child);
  const exited = new Promise((r) => child.once('exit', () => (live.delete(child), r(undefined))));
  await until(`sentinel on port ${port} answering`, 10_000, async () =>
    (await askedPrimaryPort(port, name)) === primaryPort ? true : undefined,
  );
  return { port, child, exited };
}

/**
 * `replicas` replicas of one primary and three sentinels (quorum 2) calling a primary down after
 * `downAfterMs` of silence. Resolves once every replica is in sync and every sentinel sees them.
 */
export async function startSentinelSet(opts: { replicas?: number; name?: string; downAfterMs?: number } = {}): Promise<SentinelSet> {
  const name = opts.name ?? 'gateway';
  const downAfterMs = opts.downAfterMs ?? 1_000;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-sentinel-'));
  const nodes: RedisServer[] = [];
  const sentinels: { port: number; child: ChildProcess; exited: Promise<unknown> }[] = [];
  const stop = async () => {
    for (const s of sentinels) s.child.kill('SIGKILL');
    await Promise.all(sentinels.map((s) => s.exited));
    await Promise.all(nodes.map((n) => n.stop().catch(() => undefined)));
    fs.rmSync(dir, { recursive: true, force: true });
  };
  const byPort = (port: number) => nodes.find((n) => n.port === port);
  const primary = async () => {
    const port = await until('a sentinel naming the primary', 10_000, () => askedPrimaryPort(sentinels[0]!.port, name));
    const node = byPort(port);
    if (!node) throw new Error(`the sentinels name port ${port}, not one of this set`);
    return node;
  };
  const role = async (n: RedisServer) => (await n.command('ROLE').catch(() => '')).split('\r\n')[2] ?? '';
  try {
    nodes.push(await startRedis());
    for (let i = 0; i < (opts.replicas ?? 2); i++) nodes.push(await startRedis(['--replicaof', '127.0.0.1', String(nodes[0]!.port)]));
    await until('replicas in sync', 10_000, async () => {
      const info = await nodes[0]!.command('INFO', 'replication');
      return (info.match(/state=online/g)?.length ?? 0) === nodes.length - 1 ? true : undefined;
    });
    for (let i = 0; i < 3; i++) sentinels.push(await startSentinel(dir, name, nodes[0]!.port, downAfterMs));
    await until('sentinels seeing each other and the replicas', 15_000, async () => {
      const views = await Promise.all(sentinels.map((s) => rawCommand(s.port, ['SENTINEL', 'master', name]).catch(() => '')));
      const field = (v: string, f: string) => Number(new RegExp(`\\r\\n${f}\\r\\n\\$\\d+\\r\\n(\\d+)`).exec(v)?.[1] ?? -1);
      return views.every((v) => field(v, 'num-other-sentinels') === 2 && field(v, 'num-slaves') === nodes.length - 1) ? true : undefined;
    });
  } catch (err) {
    await stop();
    throw err;
  }
  return {
    url: `redis+sentinel://${sentinels.map((s) => `127.0.0.1:${s.port}`).join(',')}/${name}`,
    name,
    nodes,
    primary,
    async failover() {
      const old = await primary();
      await old.kill();
      const port = await until('a replica promoted by the sentinels', 30_000, async () => {
        const p = await askedPrimaryPort(sentinels[0]!.port, name);
        return p !== undefined && p !== old.port ? p : undefined;
      });
      const next = byPort(port)!;
      await until('the promoted replica answering as primary', 10_000, async () => ((await role(next)) === 'master' ? true : undefined));
      return { old, primary: next };
    },
    async rejoin(node) {
      await node.revive();
      await until('the rejoined node replicating the primary', 30_000, async () => ((await role(node)) === 'slave' ? true : undefined));
    },
    pauseSentinels() {
      for (const s of sentinels) s.child.kill('SIGSTOP');
    },
    resumeSentinels() {
      for (const s of sentinels) s.child.kill('SIGCONT');
    },
    stop,
  };
}

/**
 * The Redis store's connections: one server (`redis://`), a Cluster (`redis+cluster://host:port,…`)
 * or a primary found through Sentinel (`redis+sentinel://host:port,…/<master name>`) from the URL,
 * the boot checks (reachable, `maxmemory-policy` not evicting, on the primary found), readiness and close.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { Cluster, Redis } from 'ioredis';
import type { ChainableCommander, RedisOptions } from 'ioredis';
import type { Logger } from '../../../lib/logger';
import { parseClusterUrl, parseSentinelUrl } from '../../../lib/redis-url';
import { defineScripts } from './scripts';
import type { WithScripts } from './scripts';

/** One server or a Cluster (`redis+cluster://`): the same commands, routed by key on a Cluster. */
export type Conn = Redis | Cluster;
/** The command connection: the store's Lua scripts are defined on it. */
export type ScriptConn = WithScripts<Conn>;

/** A command connection and a subscriber connection (a subscribed connection takes no other commands). */
export interface Connections {
  redis: ScriptConn;
  sub: Conn;
}

export interface ConnectOptions {
  /** How long boot waits for the first connection. */
  connectTimeoutMs?: number;
  /** A command not answered within this fails (the caller answers 503, nothing hangs). */
  commandTimeoutMs?: number;
  logger?: Logger;
}

/** Redis refused or could not be reached at boot: the message names the setting to fix. */
export class RedisStoreError extends Error {}

const EVICTING = /^(allkeys|volatile)-/;

/**
 * Refuses an evicting `maxmemory-policy`: an evicted slot member would grant a sixth stream, an
 * evicted record would end one. `noeviction` makes Redis refuse writes instead (creates fail closed).
 */
export function checkMaxmemoryPolicy(policy: string | undefined): string | undefined {
  if (policy && EVICTING.test(policy)) {
    return (
      `refusing to start: Redis maxmemory-policy is ${policy}, which evicts keys (slots and streams would vanish). ` +
      'Set maxmemory-policy noeviction on the Redis server (CONFIG SET maxmemory-policy noeviction, or in redis.conf).'
    );
  }
  return undefined;
}

/**
 * Connects (a command connection with no offline queue, so a command fails fast while Redis is
 * away; and a subscriber connection, which ioredis resubscribes after a reconnect) and checks
 * `maxmemory-policy`. Throws RedisStoreError naming what to fix.
 *
 * No auto-pipelining: each batch it forms is a new ioredis Pipeline, which copies every command
 * and script onto itself (hundreds of properties), and a tick sends one command, so most batches
 * held one. Measured with `npm run bench scale` (300 streams over 3 replicas): gateway CPU per
 * stream-second 1.59–1.74 ms with it, 1.28 ms without.
 */
export async function connect(url: string, opts: ConnectOptions = {}): Promise<Connections> {
  const log = opts.logger;
  const common = {
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    connectTimeout: opts.connectTimeoutMs ?? 5_000,
    commandTimeout: opts.commandTimeoutMs ?? 2_000,
    retryStrategy: (times: number) => Math.min(100 * times, 2_000),
    // ioredis's guard timer after disconnect (untyped option, default 2 s): it outlives a socket
    // that was already dead and would hold the process that long after close().
    disconnectTimeout: 200,
  };
  const redis = defineScripts(open(url, common));
  // The subscriber fails fast too: a results socket is refused (1011) rather than left waiting.
  const sub = open(url, common);
  // One line per state change, not one per retry: an outage must not flood the log.
  let lastError = '';
  for (const [name, conn] of [
    ['command', redis as Conn],
    ['subscriber', sub],
  ] as const) {
    reconnectAfterEnd(conn, name, log);
    let down = false;
    conn.on('error', (err: Error) => {
      lastError = err.message;
      if (!down) log?.warn({ err: err.message, connection: name }, 'redis connection error');
      down = true;
    });
    conn.on('ready', () => {
      if (down) log?.info({ connection: name }, 'redis connection restored');
      down = false;
    });
  }
  const where = safeUrl(url);
  try {
    await Promise.all([redis.connect(), sub.connect()]);
  } catch (err) {
    closeNow(redis);
    closeNow(sub);
    throw new RedisStoreError(
      `cannot reach Redis at ${where} (REDIS_URL / store.redisUrl): ${lastError || (err instanceof Error ? err.message : String(err))}`,
    );
  }
  const refused = checkMaxmemoryPolicy(await maxmemoryPolicy(redis, log));
  if (refused) {
    closeNow(redis);
    closeNow(sub);
    throw new RedisStoreError(refused);
  }
  return { redis, sub };
}

/** The policy of every primary of a Cluster (one evicting node is enough to lose slots): an evicting one if any. */
async function maxmemoryPolicy(conn: Conn, log: Logger | undefined): Promise<string | undefined> {
  let policy: string | undefined;
  try {
    for (const node of primaries(conn)) {
      const reply = (await node.call('CONFIG', 'GET', 'maxmemory-policy')) as string[];
      if (!policy || checkMaxmemoryPolicy(reply[1])) policy = reply[1];
    }
  } catch (err) {
    // Managed services may rename CONFIG: say so, and that the policy must be set there.
    log?.warn(
      { err: err instanceof Error ? err.message : String(err) },
      'cannot read Redis maxmemory-policy (CONFIG GET refused): make sure it is noeviction',
    );
  }
  return policy;
}

export async function isReady(conn: Conn): Promise<boolean> {
  try {
    return (await conn.ping()) === 'PONG';
  } catch (err) {
    resetIfTimedOut(conn, err);
    return false;
  }
}

const lastReset = new WeakMap<Conn, number>();

/**
 * A command that timed out on an open connection means its bytes went nowhere (a partition that
 * drops rather than resets): Redis will never answer it, and ioredis would match every later reply
 * to it, so the connection would stay useless after the partition heals. Reconnecting (at most once
 * a second) starts a clean one.
 */
export function resetIfTimedOut(conn: Conn, err: unknown): void {
  if (!(err instanceof Error) || err.message !== 'Command timed out') return;
  const now = Date.now();
  if (now - (lastReset.get(conn) ?? 0) < 1000) return;
  lastReset.set(conn, now);
  // Only an open connection: one that is (re)connecting already starts clean.
  if (conn.status === 'ready') conn.disconnect(true);
}

/** Connections this process closed on purpose: their end is final. */
const closing = new WeakSet<Conn>();

function closeNow(conn: Conn): void {
  closing.add(conn);
  conn.disconnect();
}

/** How long a connection that ended on its own waits before connecting again. */
const REOPEN_AFTER_MS = 500;

/**
 * ioredis gives a connection up for good ("Connection is closed.") when it is told to reconnect
 * (a failover announced by the sentinels, a READONLY reply, a timed-out command) while its lookup of
 * the primary is in flight: the lookup fails and the client ends instead of retrying. Seen under
 * repeated Sentinel failovers, where it left every replica without its store (the symptom of
 * redis/ioredis#1683). A connection that
 * ends without being closed here is connected again (and again, until it succeeds); the
 * subscriber's channels come back with it, as after any reconnect.
 */
function reconnectAfterEnd(conn: Conn, name: string, log: Logger | undefined): void {
  conn.on('end', () => {
    if (closing.has(conn)) return;
    log?.warn({ connection: name }, 'redis client gave the connection up: connecting again');
    setTimeout(() => {
      if (!closing.has(conn) && conn.status === 'end') conn.connect().catch(() => undefined);
    }, REOPEN_AFTER_MS).unref();
  });
}

/** QUIT (replies in flight finish), bounded: with Redis away it would wait; then no reconnecting. */
export async function closeConnections({ redis, sub }: Connections): Promise<void> {
  closing.add(redis);
  closing.add(sub);
  const timer = new AbortController();
  await Promise.race([
    Promise.allSettled([redis.quit(), sub.quit()]),
    sleep(1_000, undefined, { signal: timer.signal }).catch(() => undefined),
  ]);
  timer.abort();
  closeNow(redis);
  closeNow(sub);
}

/** Every key matching a glob, on every primary of a Cluster (deduplicated: SCAN may return one twice). */
export async function scan(conn: Conn, pattern: string): Promise<string[]> {
  const found = new Set<string>();
  for (const node of primaries(conn)) {
    let cursor = '0';
    do {
      const [next, batch] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
      for (const k of batch) found.add(k);
      cursor = next;
    } while (cursor !== '0');
  }
  return [...found];
}

/** A connection for `url`: a Cluster client for `redis+cluster://`, the sentinels' primary for `redis+sentinel://`, else one server. */
function open(url: string, common: RedisOptions): Conn {
  const sentinel = parseSentinelUrl(url);
  if (sentinel) {
    return new Redis({
      ...common,
      sentinels: sentinel.nodes,
      name: sentinel.name,
      role: 'master',
      username: sentinel.username,
      password: sentinel.password,
      ...(sentinel.tls ? { tls: {}, enableTLSForSentinelMode: true } : {}),
      sentinelRetryStrategy: common.retryStrategy ?? undefined,
      // Told of a promotion by the sentinels themselves (+switch-master), not only by a dead socket.
      failoverDetector: true,
      // A demoted primary that still holds the connection answers READONLY: ask the sentinels again.
      reconnectOnError: (err) => err.message.startsWith('READONLY'),
    });
  }
  const cluster = parseClusterUrl(url);
  if (!cluster) return new Redis(url, common);
  const { lazyConnect, enableOfflineQueue, retryStrategy, ...perNode } = common;
  return new Cluster(cluster.nodes, {
    lazyConnect,
    enableOfflineQueue,
    clusterRetryStrategy: retryStrategy,
    redisOptions: { ...perNode, username: cluster.username, password: cluster.password, ...(cluster.tls ? { tls: {} } : {}) },
  });
}

/** The connections to scan or check one by one: each primary of a Cluster, or the one server. */
function primaries(conn: Conn): Redis[] {
  return conn instanceof Cluster ? conn.nodes('master') : [conn];
}

/** The URL without its password, for messages. */
function safeUrl(url: string): string {
  if (parseClusterUrl(url) || parseSentinelUrl(url)) return url.replace(/^([^/]+\/\/[^:@/]*:)[^@/]*@/, '$1***@');
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return '(unparseable URL)';
  }
}

/** A pipeline's replies in order; the first command Redis refused rejects the whole read. */
export async function pipelineReplies(pipeline: ChainableCommander): Promise<unknown[]> {
  return ((await pipeline.exec()) ?? []).map(([err, value]) => {
    if (err) throw err;
    return value;
  });
}

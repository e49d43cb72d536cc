/**
 * The shared store of a fleet of replicas (`REDIS_URL` / `store.redisUrl`), with the semantics of
 * the memory store: whatever one replica writes, every replica reads; slots are exact across
 * replicas. One server (`redis://`) or a Cluster (`redis+cluster://host:port,…`). A call Redis
 * cannot answer throws StoreUnavailableError (503 `store_unavailable`).
 *
 * Made of one class per role of `Store` (../store.ts) on shared connections, composed as the memory
 * store's are (../compose.ts); the key layout is in ./keys.ts, the Lua scripts in ./scripts.ts.
 */
import { composeStore } from '../compose';
import type { Store } from '../store';
import { RedisBroker } from './broker';
import { RedisClaims } from './claims';
import { closeConnections, connect, isReady } from './connection';
import type { ConnectOptions, Connections } from './connection';
import { RedisCounters } from './counters';
import { RedisFeedback } from './feedback';
import { DEFAULT_PREFIX, RedisKeys } from './keys';
import { RedisMembers } from './members';
import { RedisResultWindows } from './result-windows';
import type { ResultWindowOptions } from './result-windows';
import { RedisContext } from './role';
import { RedisStreams } from './streams';
import { RedisSlots } from './slots';

export interface RedisStoreOptions extends ConnectOptions {
  /** Key and channel prefix (tests use one per store so stores on one server do not meet). */
  prefix?: string;
  /** Reinfer's result windows: their longest TTL (`legacy.resultWindowSeconds`) and how long they wait to be written. */
  resultWindows?: ResultWindowOptions;
  /** How long tick commits are gathered into one script call (`store.commitBatchMs`; 0: one turn of the event loop). */
  commitBatchMs?: number;
}

/** Connects (./connection.ts) and builds the store; throws RedisStoreError naming what to fix. */
export async function connectRedisStore(url: string, opts: RedisStoreOptions = {}): Promise<Store> {
  return redisStore(await connect(url, opts), opts);
}

/** The store on connections made already (closing it closes them). */
export function redisStore(
  connections: Connections,
  opts: Omit<RedisStoreOptions, keyof ConnectOptions> & Pick<ConnectOptions, 'logger'> = {},
): Store {
  const context = new RedisContext(connections.redis, new RedisKeys(opts.prefix ?? DEFAULT_PREFIX), opts.logger);
  const broker = new RedisBroker(context, connections.sub);
  const windows = new RedisResultWindows(context, opts.resultWindows);
  const roles = {
    slots: new RedisSlots(context),
    streams: new RedisStreams(context, opts.commitBatchMs),
    members: new RedisMembers(context),
    claims: new RedisClaims(context),
    feedback: new RedisFeedback(context),
    broker,
    counters: new RedisCounters(context),
    windows,
  };
  return composeStore(roles, {
    ready: () => isReady(connections.redis),
    close: async () => {
      await windows.flushNow();
      broker.clear();
      await closeConnections(connections);
    },
  });
}

/**
 * The shared store of a fleet of replicas (`REDIS_URL` / `store.redisUrl`), with the semantics of
 * `MemoryStore`: whatever one replica writes, every replica reads; slots are exact across replicas.
 * One server (`redis://`) or a Cluster (`redis+cluster://host:port,…`). A call Redis cannot answer
 * throws StoreUnavailableError (503 `store_unavailable`).
 *
 * Made of one class per role of `Store` (../store.ts) on shared connections; the key layout is in
 * ./keys.ts, the Lua scripts in ./scripts.ts.
 */
import type { ResultWindows } from '../result-windows';
import type { Broker, Claims, Counters, Feedback, Members, SessionRecords, Slots, Store } from '../store';
import { RedisBroker } from './broker';
import { closeConnections, connect, isReady } from './connection';
import type { ConnectOptions, Connections } from './connection';
import { RedisCounters } from './counters';
import { RedisFeedback } from './feedback';
import { DEFAULT_PREFIX, RedisKeys } from './keys';
import { RedisMembership } from './membership';
import { RedisResultWindows } from './result-windows';
import type { ResultWindowOptions } from './result-windows';
import { RedisContext } from './role';
import { RedisSessions } from './sessions';
import { RedisSlots } from './slots';

export interface RedisStoreOptions extends ConnectOptions {
  /** Key and channel prefix (tests use one per store so stores on one server do not meet). */
  prefix?: string;
  /** Reinfer's result windows: their longest TTL (`legacy.resultWindowSeconds`) and how long they wait to be written. */
  resultWindows?: ResultWindowOptions;
  /** How long tick commits are gathered into one script call (`store.commitBatchMs`; 0: one turn of the event loop). */
  commitBatchMs?: number;
}

export class RedisStore implements Store {
  private readonly slots: RedisSlots;
  private readonly sessions: RedisSessions;
  private readonly members: RedisMembership;
  private readonly feedback: RedisFeedback;
  private readonly broker: RedisBroker;
  private readonly counters: RedisCounters;
  private readonly windows: RedisResultWindows;

  private constructor(
    private readonly connections: Connections,
    opts: RedisStoreOptions,
  ) {
    const context = new RedisContext(connections.redis, new RedisKeys(opts.prefix ?? DEFAULT_PREFIX), opts.logger);
    this.slots = new RedisSlots(context);
    this.sessions = new RedisSessions(context, opts.commitBatchMs);
    this.members = new RedisMembership(context);
    this.feedback = new RedisFeedback(context);
    this.broker = new RedisBroker(context, connections.sub);
    this.counters = new RedisCounters(context);
    this.windows = new RedisResultWindows(context, opts.resultWindows);
  }

  /** Connects (./connection.ts); throws RedisStoreError naming what to fix. */
  static async connect(url: string, opts: RedisStoreOptions = {}): Promise<RedisStore> {
    return new RedisStore(await connect(url, opts), opts);
  }

  // Every call of Store, answered by the class of its role.
  acquireSlot: Slots['acquireSlot'] = (...a) => this.slots.acquireSlot(...a);
  bindSlot: Slots['bindSlot'] = (...a) => this.slots.bindSlot(...a);
  restoreSlot: Slots['restoreSlot'] = (...a) => this.slots.restoreSlot(...a);
  slotHolders: Slots['slotHolders'] = (...a) => this.slots.slotHolders(...a);
  slotKeys: Slots['slotKeys'] = () => this.slots.slotKeys();
  releaseSlot: Slots['releaseSlot'] = (...a) => this.slots.releaseSlot(...a);

  putSession: SessionRecords['putSession'] = (...a) => this.sessions.putSession(...a);
  restoreSession: SessionRecords['restoreSession'] = (...a) => this.sessions.restoreSession(...a);
  getSession: SessionRecords['getSession'] = (...a) => this.sessions.getSession(...a);
  updateSession: SessionRecords['updateSession'] = (...a) => this.sessions.updateSession(...a);
  expireSession: SessionRecords['expireSession'] = (...a) => this.sessions.expireSession(...a);
  endSession: SessionRecords['endSession'] = (...a) => this.sessions.endSession(...a);
  renewLease: SessionRecords['renewLease'] = (...a) => this.sessions.renewLease(...a);
  addCost: SessionRecords['addCost'] = (...a) => this.sessions.addCost(...a);
  setPrompt: SessionRecords['setPrompt'] = (...a) => this.sessions.setPrompt(...a);
  claimSession: SessionRecords['claimSession'] = (...a) => this.sessions.claimSession(...a);
  commitTick: SessionRecords['commitTick'] = (...a) => this.sessions.commitTick(...a);
  sessionsOf: SessionRecords['sessionsOf'] = (...a) => this.sessions.sessionsOf(...a);
  indexedSessions: SessionRecords['indexedSessions'] = (...a) => this.sessions.indexedSessions(...a);

  heartbeat: Members['heartbeat'] = (...a) => this.members.heartbeat(...a);
  membership: Members['membership'] = (...a) => this.members.membership(...a);
  markDraining: Members['markDraining'] = (...a) => this.members.markDraining(...a);
  markImpaired: Members['markImpaired'] = (...a) => this.members.markImpaired(...a);
  forgetReplica: Members['forgetReplica'] = (...a) => this.members.forgetReplica(...a);
  claimOnce: Claims['claimOnce'] = (...a) => this.members.claimOnce(...a);

  addFeedback: Feedback['addFeedback'] = (...a) => this.feedback.addFeedback(...a);
  feedbackOf: Feedback['feedbackOf'] = (...a) => this.feedback.feedbackOf(...a);

  publish: Broker['publish'] = (...a) => this.broker.publish(...a);
  subscribe: Broker['subscribe'] = (...a) => this.broker.subscribe(...a);

  hbatch: Counters['hbatch'] = (...a) => this.counters.hbatch(...a);
  hgetall: Counters['hgetall'] = (...a) => this.counters.hgetall(...a);
  hdel: Counters['hdel'] = (...a) => this.counters.hdel(...a);
  keys: Counters['keys'] = (...a) => this.counters.keys(...a);

  putResultWindow: ResultWindows['putResultWindow'] = (...a) => this.windows.putResultWindow(...a);
  getResultWindow: ResultWindows['getResultWindow'] = (...a) => this.windows.getResultWindow(...a);

  ready(): Promise<boolean> {
    return isReady(this.connections.redis);
  }

  async close(): Promise<void> {
    await this.windows.flushNow();
    this.broker.clear();
    await closeConnections(this.connections);
  }
}

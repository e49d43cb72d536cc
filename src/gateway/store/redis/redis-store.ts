/**
 * The shared store of a fleet of replicas (`REDIS_URL` / `store.redisUrl`), with the semantics of
 * `MemoryStore`: whatever one replica writes, every replica reads; slots are exact across replicas.
 * One server (`redis://`) or a Cluster (`redis+cluster://host:port,…`). A call Redis cannot answer
 * throws StoreUnavailableError (503 `store_unavailable`). Key layout: ./keys.ts.
 */
import { Cluster } from 'ioredis';
import type { Logger } from '../../../lib/logger';
import { parseResultWindow } from '../result-windows';
import type { ResultWindow } from '../result-windows';
import { StoreUnavailableError } from '../store';
import { RedisKeys } from './keys';
import { closeConnections, connect, isReady, scan } from './connection';
import type { Conn, ConnectOptions, ScriptConn } from './connection';
import { HBATCH_FIELDS } from './scripts';
import type { FeedbackAdd, FeedbackLimits, FeedbackPage, FeedbackRecord, HashUpdate, Membership, OwnerFence, SessionRecord, SlotHolder, Store, TickCommit, TickCommitInput, Unsubscribe } from '../store';

export interface RedisStoreOptions extends ConnectOptions {
  /** Key and channel prefix (tests use one per store so stores on one server do not meet). */
  prefix?: string;
}

function encode(rec: Partial<SessionRecord>): string[] {
  return Object.entries(rec).flatMap(([k, v]) => (v === undefined ? [] : [k, JSON.stringify(v)]));
}

function decode(flat: string[] | Record<string, string>): SessionRecord {
  const entries = Array.isArray(flat) ? Array.from({ length: flat.length / 2 }, (_, i) => [flat[2 * i], flat[2 * i + 1]]) : Object.entries(flat);
  return Object.fromEntries(entries.map(([k, v]) => [k, JSON.parse(v) as unknown])) as unknown as SessionRecord;
}

export class RedisStore implements Store {
  private readonly key: RedisKeys;
  /** Local subscribers per channel; one Redis subscription per channel however many sockets listen. */
  private readonly channels = new Map<string, { handlers: Set<(m: string) => void>; subscribed: Promise<unknown> }>();
  /** The last Redis error reply logged (one line per distinct reply, not one per call). */
  private lastReply = '';

  private constructor(
    private readonly redis: ScriptConn,
    private readonly sub: Conn,
    prefix: string,
    private readonly log?: Logger,
  ) {
    this.key = new RedisKeys(prefix);
    sub.on('message', (channel: string, message: string) => {
      for (const fn of this.channels.get(this.key.channelName(channel))?.handlers ?? []) fn(message);
    });
  }

  /** Connects (./connection.ts); throws RedisStoreError naming what to fix. */
  static async connect(url: string, opts: RedisStoreOptions = {}): Promise<RedisStore> {
    const { redis, sub } = await connect(url, opts);
    return new RedisStore(redis, sub, opts.prefix ?? 'lg:', opts.logger);
  }

  /**
   * Every store call runs through here: a Redis failure (connection gone, command timed out, an
   * error reply) becomes StoreUnavailableError (503 `store_unavailable`). Timing and outage
   * tracking are the gateway's `measuredStore` around the whole store, not done here twice.
   */
  private async guard<T>(op: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      // A nested call (updateSession → getSession) was wrapped already.
      if (err instanceof StoreUnavailableError) throw err;
      // A bug here (a record that does not parse, a wrong type) is not an outage: a 500, logged.
      if (err instanceof TypeError || err instanceof SyntaxError || err instanceof RangeError || err instanceof ReferenceError) throw err;
      // Redis answered with an error (out of memory, read-only replica, a script bug): worth a line;
      // connection errors are logged once per state change by connect().
      if (err instanceof Error && err.name === 'ReplyError' && err.message !== this.lastReply) {
        this.lastReply = err.message;
        this.log?.error({ err: err.message, op }, 'redis refused a store call');
      }
      throw new StoreUnavailableError(op, err);
    }
  }

  private slotKeysOf(keyHash: string): string[] {
    return [this.key.slots(keyHash), this.key.slotInfo(keyHash)];
  }

  async acquireSlot(keyHash: string, slotId: string, limit: number, replica?: string): Promise<boolean> {
    return this.guard('acquireSlot', async () => (await this.redis.acquireLua(...this.slotKeysOf(keyHash), limit, slotId, replica ?? '')) === 1);
  }

  async bindSlot(keyHash: string, slotId: string, streamId: string): Promise<void> {
    return this.guard('bindSlot', async () => {
      await this.redis.bindLua(...this.slotKeysOf(keyHash), slotId, streamId);
    });
  }

  async slotHolders(keyHash: string): Promise<SlotHolder[]> {
    return this.guard('slotHolders', async () => {
      const [zset, info] = (await this.redis.holdersLua(...this.slotKeysOf(keyHash))) as [string[], string[]];
      const fields = new Map<string, string>();
      for (let i = 0; i < info.length; i += 2) fields.set(info[i], info[i + 1]);
      const out: SlotHolder[] = [];
      for (let i = 0; i < zset.length; i += 2) {
        const slotId = zset[i];
        out.push({ slotId, replica: fields.get(`r:${slotId}`) ?? null, streamId: fields.get(`s:${slotId}`) ?? null, acquiredAtMs: Number(zset[i + 1]) });
      }
      return out;
    });
  }

  /** SCAN for slot sets (an empty ZSET does not exist, so a key found holds a slot); the reconciler's walk. */
  async slotKeys(): Promise<string[]> {
    return this.guard('slotKeys', async () => {
      const found = await scan(this.redis, this.key.slotsPattern());
      return found.map((k) => this.key.keyHashOfSlots(k)).filter((h) => h !== undefined);
    });
  }

  async releaseSlot(keyHash: string, slotId: string): Promise<boolean> {
    return this.guard('releaseSlot', async () => (await this.redis.releaseLua(...this.slotKeysOf(keyHash), slotId)) === 1);
  }

  async putSession(rec: SessionRecord): Promise<void> {
    return this.guard('putSession', async () => {
      const key = this.key.session(rec.streamId);
      if (rec.state === 'active') await this.indexOwner(rec.streamId, rec.owner);
      await this.redis.multi().del(key).hset(key, ...encode(rec)).exec();
    });
  }

  async restoreSession(rec: SessionRecord): Promise<boolean> {
    return this.guard('restoreSession', async () => {
      // Indexed first: an index entry without its record is filtered by sessionsOf.
      if (rec.state === 'active') await this.indexOwner(rec.streamId, rec.owner);
      return (await this.redis.restoreLua(this.key.session(rec.streamId), ...encode(rec))) === 1;
    });
  }

  async getSession(streamId: string): Promise<SessionRecord | undefined> {
    return this.guard('getSession', async () => {
      const h = await this.redis.hgetall(this.key.session(streamId));
      return Object.keys(h).length ? decode(h) : undefined;
    });
  }

  async updateSession(streamId: string, patch: Partial<SessionRecord>): Promise<SessionRecord | undefined> {
    return this.guard('updateSession', async () => {
      const fields = encode(patch);
      if (!fields.length) return this.getSession(streamId);
      if (patch.owner) await this.indexOwner(streamId, patch.owner);
      const flat = (await this.redis.updateLua(this.key.session(streamId), ...fields)) as string[] | null;
      return flat ? decode(flat) : undefined;
    });
  }

  async expireSession(streamId: string, afterMs: number): Promise<void> {
    return this.guard('expireSession', async () => {
      const key = this.key.session(streamId);
      const acct = await this.redis.hget(key, 'accountId');
      if (acct === null) return;
      // The feedback drop is scheduled first and the record expires at that same instant (Redis's
      // clock), so once the record is gone its feedback is due too.
      const at = (await this.redis.schedulePruneLua(this.key.feedbackPrune(JSON.parse(acct) as string), streamId, afterMs)) as number;
      await this.redis.pexpireat(key, at);
    });
  }

  async addFeedback(rec: FeedbackRecord, limits: FeedbackLimits): Promise<FeedbackAdd> {
    return this.guard('addFeedback', async () => {
      return (await this.redis.addFeedbackLua(...this.key.feedback(rec.accountId), this.key.feedbackStreamPrefix(rec.accountId), rec.stream_id, limits.perStream, limits.perAccount, JSON.stringify(rec))) as FeedbackAdd;
    });
  }

  async feedbackOf(accountId: string, page: { limit: number; after?: string | null }): Promise<FeedbackPage> {
    return this.guard('feedbackOf', async () => {
      const after = Number(page.after ?? 0) || 0;
      const keys = this.key.feedback(accountId).slice(0, 4);
      const [next, ...items] = (await this.redis.feedbackPageLua(...keys, this.key.feedbackStreamPrefix(accountId), after, page.limit)) as string[];
      return { items: items.map((j) => JSON.parse(j) as FeedbackRecord), next: next || null };
    });
  }

  // ── Fleet. Each script touches one session hash (one hash tag). The owner index (`owned:{replica}`)
  // lives on the replica's tag, so it cannot change in the same script: a new owner is added BEFORE
  // the script (a lost reply still leaves the session findable by sessionsOf of its new owner) and
  // the old one removed after it, best effort (a call that changed the record must not throw, or its
  // caller would retry and lose: an end's winner would never release the slot). The record's owner
  // field is the truth; sessionsOf filters by it.

  private async indexOwner(streamId: string, owner: string | null): Promise<void> {
    if (owner !== null) await this.redis.sadd(this.key.owned(owner), streamId);
  }

  private async unindexOwner(streamId: string, owner: string | null): Promise<void> {
    if (owner === null) return;
    await this.redis.srem(this.key.owned(owner), streamId).catch((err: unknown) => {
      this.log?.warn({ err: err instanceof Error ? err.message : String(err), streamId }, 'owner index not updated (sessionsOf filters it)');
    });
  }

  async endSession(streamId: string, reason: string, endedAtMs: number, fence?: OwnerFence): Promise<SessionRecord | undefined> {
    return this.guard('endSession', async () => {
      const ended = encode({ state: 'ended', endReason: reason, endedAtMs, owner: null, sealedKey: '' });
      const fenceArgs = fence ? [JSON.stringify(fence.owner), String(fence.epoch)] : ['', ''];
      const flat = (await this.redis.endLua(this.key.session(streamId), ...fenceArgs, ...ended)) as string[] | null;
      if (!flat) return undefined;
      const before = decode(flat);
      await this.unindexOwner(streamId, before.owner);
      return before;
    });
  }

  async renewLease(streamId: string, leaseExpiresAtMs: number, nowMs: number): Promise<{ costMicrocents: number; sinceMs: number; record: SessionRecord } | undefined> {
    return this.guard('renewLease', async () => {
      const reply = (await this.redis.renewLua(this.key.session(streamId), JSON.stringify(leaseExpiresAtMs), JSON.stringify(nowMs))) as [string, string, string[]] | null;
      if (!reply) return undefined;
      return { costMicrocents: JSON.parse(reply[0]) as number, sinceMs: JSON.parse(reply[1]) as number, record: decode(reply[2]) };
    });
  }

  async setPrompt(streamId: string, prompt: string, atMs: number): Promise<SessionRecord | undefined> {
    return this.guard('setPrompt', async () => {
      const flat = (await this.redis.setPromptLua(this.key.session(streamId), JSON.stringify(prompt), JSON.stringify(atMs))) as string[] | null;
      return flat ? decode(flat) : undefined;
    });
  }

  async addCost(streamId: string, costMicrocents: number): Promise<boolean> {
    return this.guard('addCost', async () => (await this.redis.addCostLua(this.key.session(streamId), costMicrocents)) === 1);
  }

  async claimSession(streamId: string, expect: { owner: string | null; epoch: number }, owner: string): Promise<SessionRecord | undefined> {
    return this.guard('claimSession', async () => {
      await this.indexOwner(streamId, owner);
      const flat = (await this.redis.claimLua(this.key.session(streamId), JSON.stringify(expect.owner), expect.epoch, JSON.stringify(owner))) as string[] | null;
      if (!flat) return undefined;
      if (expect.owner !== owner) await this.unindexOwner(streamId, expect.owner);
      return decode(flat);
    });
  }

  /** One EVALSHA (one round trip): the fence, lastTick, the cost and the PUBLISH in one script. */
  async commitTick(streamId: string, c: TickCommitInput): Promise<TickCommit> {
    return this.guard('commitTick', async () => {
      const outcome = c.outcome ? (c.outcome.ok ? 'ok' : 'failed') : '';
      const ms = c.outcome ? String(Math.max(0, Math.round(c.outcome.inferenceMs))) : '0';
      const args = [JSON.stringify(c.owner), c.epoch, c.tick, c.costMicrocents, this.key.channel(c.channel), c.message, outcome, ms];
      const [ok, value] = (await this.redis.commitTickLua(this.key.session(streamId), ...args)) as [number, string];
      return ok === 1 ? { ok: true, promptRev: JSON.parse(value) as number } : { ok: false, reason: value as 'fenced' | 'duplicate' | 'ended' | 'missing' };
    });
  }

  /**
   * The index, filtered by each record (active and owned by `replica`). Entries of ended sessions are
   * dropped (ended is final; a crash between an end and its index update leaves them). Entries now
   * owned by another replica are only filtered: dropping them could race a claim back to `replica`.
   */
  async sessionsOf(replica: string): Promise<string[]> {
    return this.guard('sessionsOf', async () => {
      const key = this.key.owned(replica);
      const ids = await this.redis.smembers(key);
      if (!ids.length) return [];
      const owner = JSON.stringify(replica);
      const rows = await Promise.all(ids.map((id) => this.redis.hmget(this.key.session(id), 'state', 'owner')));
      const ended = ids.filter((_, i) => rows[i][0] === '"ended"');
      if (ended.length) await this.redis.srem(key, ...ended);
      return ids.filter((_, i) => rows[i][0] === '"active"' && rows[i][1] === owner);
    });
  }

  async heartbeat(replica: string): Promise<number> {
    return this.guard('heartbeat', async () => (await this.redis.heartbeatLua(this.key.replicas(), replica)) as number);
  }

  async membership(deadAfterMs: number): Promise<Membership> {
    return this.guard('membership', async () => {
      const [[nowMs, flat], marked] = await Promise.all([
        this.redis.membersLua(this.key.replicas()) as Promise<[number, string[]]>,
        this.redis.smembers(this.key.draining()),
      ]);
      const alive: string[] = [];
      const dead: string[] = [];
      for (let i = 0; i < flat.length; i += 2) (nowMs - Number(flat[i + 1]) > deadAfterMs ? dead : alive).push(flat[i]);
      const members = new Set([...alive, ...dead]);
      return { alive, dead, draining: marked.filter((r) => members.has(r)), nowMs };
    });
  }

  async markDraining(replica: string): Promise<void> {
    return this.guard('markDraining', async () => void (await this.redis.sadd(this.key.draining(), replica)));
  }

  /** Out of the membership; its owner index goes too (called once it owns nothing). */
  async forgetReplica(replica: string): Promise<void> {
    return this.guard('forgetReplica', async () => {
      await Promise.all([this.redis.zrem(this.key.replicas(), replica), this.redis.srem(this.key.draining(), replica), this.redis.del(this.key.owned(replica))]);
    });
  }

  async claimOnce(key: string, ttlMs: number): Promise<boolean> {
    return this.guard('claimOnce', async () => (await this.redis.set(this.key.once(key), '1', 'PX', ttlMs, 'NX')) === 'OK');
  }

  /**
   * On a Cluster a message reaches other nodes' subscribers over the cluster bus, in order per
   * publishing node only: so a channel is published from the node of the session named by its last
   * `:` segment (`results:<streamId>` → where commitTick publishes), and a stream's end can never
   * overtake its last results.
   */
  async publish(channel: string, message: string): Promise<void> {
    return this.guard('publish', async () => {
      if (this.redis instanceof Cluster) {
        const route = this.key.session(channel.slice(channel.lastIndexOf(':') + 1));
        await this.redis.publishFromLua(route, this.key.channel(channel), message);
      } else await this.redis.publish(this.key.channel(channel), message);
    });
  }

  /** Resolves once Redis confirmed the subscription: every message published after that arrives. */
  async subscribe(channel: string, onMessage: (message: string) => void): Promise<Unsubscribe> {
    return this.guard('subscribe', async () => {
      const name = this.key.channel(channel);
      let entry = this.channels.get(channel);
      if (!entry) {
        entry = { handlers: new Set(), subscribed: this.sub.subscribe(name) };
        this.channels.set(channel, entry);
      }
      const { handlers, subscribed } = entry;
      handlers.add(onMessage);
      try {
        await subscribed;
      } catch (err) {
        handlers.delete(onMessage);
        if (this.channels.get(channel)?.handlers === handlers && handlers.size === 0) this.channels.delete(channel);
        throw err;
      }
      let done = false;
      return () => {
        if (done) return;
        done = true;
        handlers.delete(onMessage);
        if (handlers.size > 0 || this.channels.get(channel)?.handlers !== handlers) return;
        this.channels.delete(channel);
        // Same connection, so ordered after the SUBSCRIBE; a later subscribe re-subscribes after it.
        this.sub.unsubscribe(name).catch(() => undefined);
      };
    });
  }

  /** One HBATCH script per hash (chunked past HBATCH_FIELDS), sent together by auto-pipelining. */
  async hbatch(updates: readonly HashUpdate[]): Promise<void> {
    return this.guard('hbatch', () => this.hbatchCalls(updates));
  }

  private async hbatchCalls(updates: readonly HashUpdate[]): Promise<void> {
    const calls: Promise<unknown>[] = [];
    for (const u of updates) {
      const args = [
        ...Object.entries(u.incr ?? {}).flatMap(([f, v]) => ['+', f, v]),
        ...Object.entries(u.min ?? {}).flatMap(([f, v]) => ['<', f, v]),
        ...Object.entries(u.max ?? {}).flatMap(([f, v]) => ['>', f, v]),
      ];
      for (let i = 0; i < args.length; i += 3 * HBATCH_FIELDS) {
        calls.push(this.redis.hbatchLua(this.key.hash(u.key), ...args.slice(i, i + 3 * HBATCH_FIELDS)));
      }
    }
    await Promise.all(calls);
  }

  async hgetall(key: string): Promise<Record<string, number>> {
    return this.guard('hgetall', async () => {
      const h = await this.redis.hgetall(this.key.hash(key));
      return Object.fromEntries(Object.entries(h).map(([f, v]) => [f, Number(v)]));
    });
  }

  async hdel(key: string, fields: readonly string[]): Promise<void> {
    return this.guard('hdel', async () => {
      if (fields.length) await this.redis.hdel(this.key.hash(key), ...fields);
    });
  }

  /** SCAN (the report's few calls, never a hot path). */
  async keys(prefix: string): Promise<string[]> {
    return this.guard('keys', async () => {
      return (await scan(this.redis, this.key.hashPattern(prefix))).map((k) => this.key.hashName(k));
    });
  }

  async ready(): Promise<boolean> {
    return isReady(this.redis);
  }

  async close(): Promise<void> {
    this.channels.clear();
    await closeConnections({ redis: this.redis, sub: this.sub });
  }

  async putResultWindow(resultId: string, window: ResultWindow, ttlMs: number): Promise<void> {
    return this.guard('putResultWindow', async () => {
      await this.redis.set(this.key.resultWindow(resultId), JSON.stringify(window), 'PX', Math.max(1, Math.round(ttlMs)));
    });
  }

  async getResultWindow(resultId: string): Promise<ResultWindow | undefined> {
    return this.guard('getResultWindow', async () => parseResultWindow(await this.redis.get(this.key.resultWindow(resultId))));
  }
}


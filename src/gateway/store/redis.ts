/**
 * The shared store of a fleet of replicas (`REDIS_URL` / `store.redisUrl`), with the semantics of
 * `MemoryStore`: whatever one replica writes, every replica reads; slots are exact across replicas.
 *
 * Keys (`P` is the prefix, `lg:` by default). Every multi-key script keeps its keys on one hash tag
 * (`{…}`), so a Redis Cluster serves them unchanged.
 *   P slots:{keyHash}          ZSET  member slot id, score acquire time (ms). One slot per member.
 *   P session:{streamId}       HASH  SessionRecord, each field JSON-encoded. PEXPIREAT = tombstone end.
 *   P fb:{acct}                ZSET  feedback seq (member = score), the account's entries oldest first.
 *   P fbe:{acct}               HASH  seq → FeedbackRecord JSON.
 *   P fbn:{acct}               HASH  streamId → entries of that stream (the per-stream cap).
 *   P fbs:{acct}:streamId      SET   seqs of one stream's entries (dropped with the stream).
 *   P fbprune:{acct}           ZSET  streamId, score = when its feedback goes (its tombstone's end).
 *   P fbseq:{acct}             STRING the account's feedback counter (page cursor).
 *   P h:<key>                  HASH  telemetry counters (usage report), numbers as decimal strings.
 *   P ch:<channel>             pub/sub channel (results fan-out), not a key.
 * Times compared inside scripts are Redis's (`TIME`), so clock skew between replicas does not matter.
 */
import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import type { Logger } from '../../lib/logger';
import type { FeedbackAdd, FeedbackLimits, FeedbackPage, FeedbackRecord, HashUpdate, Membership, SessionRecord, SlotHolder, Store, TickCommit, Unsubscribe } from './store';

const NOW_MS = `local t = redis.call('TIME') local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)`;

/** KEYS[1] slots zset; ARGV limit, slot id. 1 granted (or already held), 0 full. */
const ACQUIRE = `${NOW_MS}
if redis.call('ZSCORE', KEYS[1], ARGV[2]) then return 1 end
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[1], now, ARGV[2])
return 1`;

/** KEYS[1] session hash; ARGV field, value pairs. The record after the patch, or nil when absent. */
const UPDATE = `if redis.call('EXISTS', KEYS[1]) == 0 then return false end
redis.call('HSET', KEYS[1], unpack(ARGV))
return redis.call('HGETALL', KEYS[1])`;

/** Drops the feedback of streams whose tombstone ended (KEYS[1..4] fb, fbe, fbn, fbprune; ARGV[1] fbs prefix). */
const PRUNE = `${NOW_MS}
for _, sid in ipairs(redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now)) do
  local sk = ARGV[1] .. sid
  for _, seq in ipairs(redis.call('SMEMBERS', sk)) do
    redis.call('ZREM', KEYS[1], seq)
    redis.call('HDEL', KEYS[2], seq)
  end
  redis.call('DEL', sk)
  redis.call('HDEL', KEYS[3], sid)
  redis.call('ZREM', KEYS[4], sid)
end`;

/** KEYS fb, fbe, fbn, fbprune, fbseq; ARGV fbs prefix, streamId, perStream, perAccount, record JSON (seq filled here). */
const ADD_FEEDBACK = `${PRUNE}
if tonumber(redis.call('HGET', KEYS[3], ARGV[2]) or '0') >= tonumber(ARGV[3]) then return 'stream_full' end
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[4]) then return 'account_full' end
local seq = redis.call('INCR', KEYS[5])
redis.call('ZADD', KEYS[1], seq, seq)
redis.call('HSET', KEYS[2], seq, ARGV[5])
redis.call('HINCRBY', KEYS[3], ARGV[2], 1)
redis.call('SADD', ARGV[1] .. ARGV[2], seq)
return 'ok'`;

/** KEYS fb, fbe, fbn, fbprune; ARGV fbs prefix, after, limit. {next or '', json...}. */
const FEEDBACK_PAGE = `${PRUNE}
local limit = tonumber(ARGV[3])
local seqs = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. ARGV[2], '+inf', 'LIMIT', 0, limit + 1)
local out = {''}
if #seqs > limit then out[1] = seqs[limit] seqs[limit + 1] = nil end
if #seqs > 0 then
  for i, json in ipairs(redis.call('HMGET', KEYS[2], unpack(seqs))) do out[i + 1] = json end
end
return out`;

/** KEYS fbprune; ARGV streamId, afterMs. Schedules the stream's feedback drop; returns the time (Redis ms). */
const SCHEDULE_PRUNE = `${NOW_MS}
local at = now + tonumber(ARGV[2])
redis.call('ZADD', KEYS[1], at, ARGV[1])
return at`;

/** KEYS[1] hash; ARGV field, value, 'min'|'max'. */
const SET_EXTREME = `local cur = redis.call('HGET', KEYS[1], ARGV[1])
local v = tonumber(ARGV[2])
if cur == false or (ARGV[3] == 'min' and v < tonumber(cur)) or (ARGV[3] == 'max' and v > tonumber(cur)) then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
end
return 0`;

/**
 * KEYS[1] hash; ARGV (op, field, value) triples, op '+' add, '<' lower to, '>' raise to. One read and
 * one write for every field of a telemetry flush; numbers written back with full double precision.
 */
const HBATCH = `local fields = {}
for i = 2, #ARGV, 3 do fields[#fields + 1] = ARGV[i] end
local cur = redis.call('HMGET', KEYS[1], unpack(fields))
local vals, order = {}, {}
for i = 1, #fields do
  local f, op, v = fields[i], ARGV[3 * i - 2], tonumber(ARGV[3 * i])
  local c = vals[f]
  if c == nil then
    order[#order + 1] = f
    if cur[i] then c = tonumber(cur[i]) end
  end
  if op == '+' then c = (c or 0) + v
  elseif c == nil or (op == '<' and v < c) or (op == '>' and v > c) then c = v end
  vals[f] = c
end
local out = {}
for _, f in ipairs(order) do
  out[#out + 1] = f
  out[#out + 1] = string.format('%.17g', vals[f])
end
redis.call('HSET', KEYS[1], unpack(out))
return 0`;
/** Fields per HBATCH call: Lua's unpack() has a stack limit (~8000 values). */
const HBATCH_FIELDS = 1_000;

/** A Lua script called by its SHA1 (one round trip), loaded again after a Redis restart (NOSCRIPT). */
class Script {
  private readonly sha: string;
  constructor(private readonly lua: string) {
    this.sha = createHash('sha1').update(lua).digest('hex');
  }
  async run(redis: Redis, keys: string[], args: (string | number)[]): Promise<unknown> {
    try {
      return await redis.evalsha(this.sha, keys.length, ...keys, ...args);
    } catch (err) {
      if (!(err instanceof Error) || !err.message.startsWith('NOSCRIPT')) throw err;
      return redis.eval(this.lua, keys.length, ...keys, ...args);
    }
  }
}

const SCRIPTS = {
  acquire: new Script(ACQUIRE),
  update: new Script(UPDATE),
  addFeedback: new Script(ADD_FEEDBACK),
  feedbackPage: new Script(FEEDBACK_PAGE),
  schedulePrune: new Script(SCHEDULE_PRUNE),
  setExtreme: new Script(SET_EXTREME),
  hbatch: new Script(HBATCH),
};

export interface RedisStoreOptions {
  /** Key and channel prefix (tests use one per store so stores on one server do not meet). */
  prefix?: string;
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
 * evicted session would end one. `noeviction` makes Redis refuse writes instead (creates fail closed).
 */
export function checkMaxmemoryPolicy(policy: string | undefined): string | undefined {
  if (policy && EVICTING.test(policy)) {
    return `refusing to start: Redis maxmemory-policy is ${policy}, which evicts keys (slots and sessions would vanish). Set maxmemory-policy noeviction on the Redis server (CONFIG SET maxmemory-policy noeviction, or in redis.conf).`;
  }
  return undefined;
}

function encode(rec: Partial<SessionRecord>): string[] {
  return Object.entries(rec).flatMap(([k, v]) => (v === undefined ? [] : [k, JSON.stringify(v)]));
}

function decode(flat: string[] | Record<string, string>): SessionRecord {
  const entries = Array.isArray(flat) ? Array.from({ length: flat.length / 2 }, (_, i) => [flat[2 * i], flat[2 * i + 1]]) : Object.entries(flat);
  return Object.fromEntries(entries.map(([k, v]) => [k, JSON.parse(v) as unknown])) as unknown as SessionRecord;
}

export class RedisStore implements Store {
  private readonly p: string;
  /** Local subscribers per channel; one Redis subscription per channel however many sockets listen. */
  private readonly channels = new Map<string, { handlers: Set<(m: string) => void>; subscribed: Promise<unknown> }>();

  private constructor(
    private readonly redis: Redis,
    private readonly sub: Redis,
    prefix: string,
  ) {
    this.p = prefix;
    sub.on('message', (channel: string, message: string) => {
      for (const fn of this.channels.get(channel.slice(this.p.length + 3))?.handlers ?? []) fn(message);
    });
  }

  /**
   * Connects (a command connection with auto-pipelining and no offline queue, so a command fails
   * fast while Redis is away; and a subscriber connection, which ioredis resubscribes after a
   * reconnect) and checks `maxmemory-policy`. Throws RedisStoreError naming what to fix.
   */
  static async connect(url: string, opts: RedisStoreOptions = {}): Promise<RedisStore> {
    const log = opts.logger;
    const common = {
      lazyConnect: true,
      enableOfflineQueue: false,
      enableAutoPipelining: true,
      maxRetriesPerRequest: 1,
      connectTimeout: opts.connectTimeoutMs ?? 5_000,
      commandTimeout: opts.commandTimeoutMs ?? 2_000,
      retryStrategy: (times: number) => Math.min(100 * times, 2_000),
      // ioredis's guard timer after disconnect (untyped option, default 2 s): it outlives a socket
      // that was already dead and would hold the process that long after close().
      disconnectTimeout: 200,
    };
    const redis = new Redis(url, common);
    // The subscriber fails fast too: a results socket is refused (1011) rather than left waiting.
    const sub = new Redis(url, common);
    // One line per state change, not one per retry: an outage must not flood the log.
    let lastError = '';
    for (const [name, conn] of [['command', redis], ['subscriber', sub]] as const) {
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
      redis.disconnect();
      sub.disconnect();
      throw new RedisStoreError(`cannot reach Redis at ${where} (REDIS_URL / store.redisUrl): ${lastError || (err instanceof Error ? err.message : String(err))}`);
    }
    let policy: string | undefined;
    try {
      const reply = (await redis.call('CONFIG', 'GET', 'maxmemory-policy')) as string[];
      policy = reply[1];
    } catch (err) {
      // Managed services may rename CONFIG: say so, and that the policy must be set there.
      log?.warn({ err: err instanceof Error ? err.message : String(err) }, 'cannot read Redis maxmemory-policy (CONFIG GET refused): make sure it is noeviction');
    }
    const refused = checkMaxmemoryPolicy(policy);
    if (refused) {
      redis.disconnect();
      sub.disconnect();
      throw new RedisStoreError(refused);
    }
    return new RedisStore(redis, sub, opts.prefix ?? 'lg:');
  }

  private slotsKey(keyHash: string): string {
    return `${this.p}slots:{${keyHash}}`;
  }
  private sessionKey(streamId: string): string {
    return `${this.p}session:{${streamId}}`;
  }
  private feedbackKeys(acct: string): { keys: string[]; fbs: string } {
    const t = `{${acct}}`;
    const p = this.p;
    return { keys: [`${p}fb:${t}`, `${p}fbe:${t}`, `${p}fbn:${t}`, `${p}fbprune:${t}`, `${p}fbseq:${t}`], fbs: `${p}fbs:${t}:` };
  }

  async acquireSlot(keyHash: string, streamId: string, limit: number): Promise<boolean> {
    return (await SCRIPTS.acquire.run(this.redis, [this.slotsKey(keyHash)], [limit, streamId])) === 1;
  }

  async releaseSlot(keyHash: string, streamId: string): Promise<boolean> {
    return (await this.redis.zrem(this.slotsKey(keyHash), streamId)) === 1;
  }

  async slotsInUse(keyHash: string): Promise<number> {
    return this.redis.zcard(this.slotsKey(keyHash));
  }

  async putSession(rec: SessionRecord): Promise<void> {
    const key = this.sessionKey(rec.streamId);
    await this.redis.multi().del(key).hset(key, ...encode(rec)).exec();
  }

  async getSession(streamId: string): Promise<SessionRecord | undefined> {
    const h = await this.redis.hgetall(this.sessionKey(streamId));
    return Object.keys(h).length ? decode(h) : undefined;
  }

  async updateSession(streamId: string, patch: Partial<SessionRecord>): Promise<SessionRecord | undefined> {
    const fields = encode(patch);
    if (!fields.length) return this.getSession(streamId);
    const flat = (await SCRIPTS.update.run(this.redis, [this.sessionKey(streamId)], fields)) as string[] | null;
    return flat ? decode(flat) : undefined;
  }

  async expireSession(streamId: string, afterMs: number): Promise<void> {
    const key = this.sessionKey(streamId);
    const acct = await this.redis.hget(key, 'accountId');
    if (acct === null) return;
    // The feedback drop is scheduled first and the record expires at that same instant (Redis's
    // clock), so once the record is gone its feedback is due too.
    const at = (await SCRIPTS.schedulePrune.run(this.redis, [this.feedbackKeys(JSON.parse(acct) as string).keys[3]], [streamId, afterMs])) as number;
    await this.redis.pexpireat(key, at);
  }

  async addFeedback(rec: FeedbackRecord, limits: FeedbackLimits): Promise<FeedbackAdd> {
    const { keys, fbs } = this.feedbackKeys(rec.accountId);
    return (await SCRIPTS.addFeedback.run(this.redis, keys, [fbs, rec.stream_id, limits.perStream, limits.perAccount, JSON.stringify(rec)])) as FeedbackAdd;
  }

  async feedbackOf(accountId: string, page: { limit: number; after?: string | null }): Promise<FeedbackPage> {
    const { keys, fbs } = this.feedbackKeys(accountId);
    const after = Number(page.after ?? 0) || 0;
    const [next, ...items] = (await SCRIPTS.feedbackPage.run(this.redis, keys.slice(0, 4), [fbs, after, page.limit])) as string[];
    return { items: items.map((j) => JSON.parse(j) as FeedbackRecord), next: next || null };
  }

  // Fleet operations: their Lua scripts are being written (issue 10); until then a RedisStore
  // fleet refuses them loudly rather than acting without fencing.
  private notYet(): never {
    throw new Error('RedisStore: fleet operation not implemented yet');
  }
  async bindSlot(): Promise<void> {
    this.notYet();
  }
  async slotHolders(): Promise<SlotHolder[]> {
    this.notYet();
  }
  async slotKeys(): Promise<string[]> {
    this.notYet();
  }
  async endSession(): Promise<SessionRecord | undefined> {
    this.notYet();
  }
  async renewLease(): Promise<{ costMicrocents: number; sinceMs: number; record: SessionRecord } | undefined> {
    this.notYet();
  }
  async setPrompt(): Promise<SessionRecord | undefined> {
    this.notYet();
  }
  async claimSession(): Promise<SessionRecord | undefined> {
    this.notYet();
  }
  async commitTick(): Promise<TickCommit> {
    this.notYet();
  }
  async sessionsOf(): Promise<string[]> {
    this.notYet();
  }
  async heartbeat(): Promise<number> {
    this.notYet();
  }
  async membership(): Promise<Membership> {
    this.notYet();
  }
  async forgetReplica(): Promise<void> {
    this.notYet();
  }
  async claimOnce(): Promise<boolean> {
    this.notYet();
  }

  async publish(channel: string, message: string): Promise<void> {
    await this.redis.publish(`${this.p}ch:${channel}`, message);
  }

  /** Resolves once Redis confirmed the subscription: every message published after that arrives. */
  async subscribe(channel: string, onMessage: (message: string) => void): Promise<Unsubscribe> {
    const name = `${this.p}ch:${channel}`;
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
  }

  private hashKey(key: string): string {
    return `${this.p}h:${key}`;
  }

  async hincr(key: string, field: string, by = 1): Promise<void> {
    if (Number.isInteger(by)) await this.redis.hincrby(this.hashKey(key), field, by);
    else await this.redis.hincrbyfloat(this.hashKey(key), field, by);
  }

  async hsetMin(key: string, field: string, value: number): Promise<void> {
    await SCRIPTS.setExtreme.run(this.redis, [this.hashKey(key)], [field, value, 'min']);
  }

  async hsetMax(key: string, field: string, value: number): Promise<void> {
    await SCRIPTS.setExtreme.run(this.redis, [this.hashKey(key)], [field, value, 'max']);
  }

  /** One HBATCH script per hash (chunked past HBATCH_FIELDS), sent together by auto-pipelining. */
  async hbatch(updates: readonly HashUpdate[]): Promise<void> {
    const calls: Promise<unknown>[] = [];
    for (const u of updates) {
      const args = [
        ...Object.entries(u.incr ?? {}).flatMap(([f, v]) => ['+', f, v]),
        ...Object.entries(u.min ?? {}).flatMap(([f, v]) => ['<', f, v]),
        ...Object.entries(u.max ?? {}).flatMap(([f, v]) => ['>', f, v]),
      ];
      for (let i = 0; i < args.length; i += 3 * HBATCH_FIELDS) {
        calls.push(SCRIPTS.hbatch.run(this.redis, [this.hashKey(u.key)], args.slice(i, i + 3 * HBATCH_FIELDS)));
      }
    }
    await Promise.all(calls);
  }

  async hgetall(key: string): Promise<Record<string, number>> {
    const h = await this.redis.hgetall(this.hashKey(key));
    return Object.fromEntries(Object.entries(h).map(([f, v]) => [f, Number(v)]));
  }

  async hdel(key: string, fields: readonly string[]): Promise<void> {
    if (fields.length) await this.redis.hdel(this.hashKey(key), ...fields);
  }

  /** SCAN (the report's few calls, never a hot path); on a Cluster this would scan each primary. */
  async keys(prefix: string): Promise<string[]> {
    const base = this.hashKey('');
    const pattern = `${(base + prefix).replace(/[*?[\]\\]/g, '\\$&')}*`;
    const found = new Set<string>();
    let cursor = '0';
    do {
      const [next, batch] = await this.redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
      for (const k of batch) found.add(k.slice(base.length));
      cursor = next;
    } while (cursor !== '0');
    return [...found];
  }

  async ready(): Promise<boolean> {
    try {
      return (await this.redis.ping()) === 'PONG';
    } catch {
      return false;
    }
  }

  /** QUIT (replies in flight finish), bounded: with Redis away it would wait; then no reconnecting. */
  async close(): Promise<void> {
    this.channels.clear();
    const timer = new AbortController();
    await Promise.race([Promise.allSettled([this.redis.quit(), this.sub.quit()]), sleep(1_000, undefined, { signal: timer.signal }).catch(() => undefined)]);
    timer.abort();
    this.redis.disconnect();
    this.sub.disconnect();
  }
}

/** The URL without its password, for messages. */
function safeUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return '(unparseable URL)';
  }
}

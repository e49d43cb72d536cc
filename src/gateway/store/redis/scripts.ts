/**
 * The Redis store's Lua scripts, each one atomic step on keys of one hash tag (./keys.ts), with the
 * KEYS and ARGV it takes. Lua, because a check and the write it guards (a slot count, a fence, a
 * cap) must not interleave with another replica's, and because one script is one round trip.
 */
import type { Cluster, Redis } from 'ioredis';

const NOW_MS = `local t = redis.call('TIME') local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)`;

// ── Slots of one key (its two keys share the key hash's tag).
/** KEYS slots zset, slot info hash; ARGV limit, slot id, replica ('' none). 1 granted (or already held), 0 full. */
const ACQUIRE = `${NOW_MS}
if redis.call('ZSCORE', KEYS[1], ARGV[2]) then return 1 end
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[1], now, ARGV[2])
if ARGV[3] ~= '' then redis.call('HSET', KEYS[2], 'r:' .. ARGV[2], ARGV[3]) end
return 1`;

/** KEYS slots zset, slot info hash; ARGV slot id. 1 released, 0 not held. Its holder info goes with it. */
const RELEASE = `local n = redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], 'r:' .. ARGV[1], 's:' .. ARGV[1])
return n`;

/** KEYS slots zset, slot info hash; ARGV slot id, stream id. Binds only a slot still held. */
const BIND = `if redis.call('ZSCORE', KEYS[1], ARGV[1]) then redis.call('HSET', KEYS[2], 's:' .. ARGV[1], ARGV[2]) end
return 0`;

/**
 * KEYS slots zset, slot info hash; ARGV slot id, stream id, replica. A missing slot put back, bound
 * (1); 0 held already. Redis's clock is read only to put one back: every keepalive asks.
 */
const RESTORE_SLOT = `if redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 0 end
${NOW_MS}
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('HSET', KEYS[2], 'r:' .. ARGV[1], ARGV[3], 's:' .. ARGV[1], ARGV[2])
return 1`;

// ── Stream records: scripts on one record's hash (KEYS[1]). Fields are JSON: strings compare quoted ('"active"').
/** Returns false unless the record exists and is active (callers answer undefined / 'missing'). */
const ACTIVE = `local st = redis.call('HGET', KEYS[1], 'state')
if st ~= '"active"' then return false end`;

/**
 * ARGV fence owner (JSON, '' for none), fence epoch, then the ended-state field pairs. The record
 * before, or nil (already ended, absent, or owned by another owner or epoch than the fence): end-once.
 */
const END = `${ACTIVE}
if ARGV[1] ~= '' then
  local v = redis.call('HMGET', KEYS[1], 'owner', 'epoch')
  if v[1] ~= ARGV[1] or tonumber(v[2] or '0') ~= tonumber(ARGV[2]) then return false end
end
local before = redis.call('HGETALL', KEYS[1])
redis.call('HSET', KEYS[1], unpack(ARGV, 3))
return before`;

/** ARGV leaseExpiresAtMs, nowMs (JSON). {cost, since (JSON)}, or nil unless active. */
const RENEW = `local v = redis.call('HMGET', KEYS[1], 'state', 'costMicrocents', 'lastKeepaliveAtMs')
if v[1] ~= '"active"' then return false end
redis.call('HSET', KEYS[1], 'leaseExpiresAtMs', ARGV[1], 'costMicrocents', '0', 'lastKeepaliveAtMs', ARGV[2])
return {v[2] or '0', v[3] or '0'}`;

/** ARGV prompt, atMs (JSON). The record after (promptRev + 1), or nil unless active. */
const SET_PROMPT = `${ACTIVE}
local rev = tonumber(redis.call('HGET', KEYS[1], 'promptRev') or '0') + 1
redis.call('HSET', KEYS[1], 'prompt', ARGV[1], 'promptUpdatedAtMs', ARGV[2], 'promptRev', tostring(rev))
return redis.call('HGETALL', KEYS[1])`;

/** A cost as the record's JSON field: integers without an exponent, fractions exactly (%.17g). */
const COST_FIELD = `local function costField(cost)
  if cost == math.floor(cost) and math.abs(cost) < 2^53 then return string.format('%.0f', cost) end
  return string.format('%.17g', cost)
end`;

/** ARGV cost. Adds it to the cost since the previous keepalive; 1, or nil unless active. */
const ADD_COST = `${ACTIVE}
${COST_FIELD}
redis.call('HSET', KEYS[1], 'costMicrocents', costField(tonumber(redis.call('HGET', KEYS[1], 'costMicrocents') or '0') + tonumber(ARGV[1])))
return 1`;

/** ARGV expected owner (JSON), expected epoch, new owner (JSON). The record after, or nil: compare-and-set. */
const CLAIM = `${ACTIVE}
local v = redis.call('HMGET', KEYS[1], 'owner', 'epoch')
local epoch = tonumber(v[2] or '0')
if v[1] ~= ARGV[1] or epoch ~= tonumber(ARGV[2]) then return false end
redis.call('HSET', KEYS[1], 'owner', ARGV[3], 'epoch', tostring(epoch + 1))
return redis.call('HGETALL', KEYS[1])`;

/**
 * KEYS the record hashes of one or more tick commits; ARGV 8 per commit, in KEYS order: owner
 * (JSON), epoch, tick, cost, channel, message, outcome ('ok', 'failed' or '' for none), inference ms.
 * Each is the fenced tick: checks, lastTick, cost, the outcome's counters and the publish (one HMGET,
 * one HSET, one PUBLISH), so a result is published at most once per (stream, tick) and never by a
 * fenced owner. Commits are independent of each other (a batch of them is one round trip and one
 * EVALSHA); each answers {1, promptRev, leaseExpiresAtMs} or {0, reason, ''}, flat in KEYS order: the
 * owner learns a prompt change and a lease renewed on another replica from its ticks, without reads.
 * (Template pieces only wrap the longest lines: the joined text is the script.)
 */
const COMMIT_TICKS =
  `${COST_FIELD}
local function commit(key, o)
  local v = redis.call('HMGET', key, 'state', 'owner', 'epoch', 'lastTick', 'promptRev', ` +
  `'costMicrocents', 'inferencesCompleted', 'inferencesFailed', 'leaseExpiresAtMs')
  if not v[1] then return 0, 'missing', '' end
  if v[1] ~= '"active"' then return 0, 'ended', '' end
  if v[2] ~= ARGV[o + 1] or tonumber(v[3] or '0') ~= tonumber(ARGV[o + 2]) then return 0, 'fenced', '' end
  if tonumber(ARGV[o + 3]) <= tonumber(v[4] or '-1') then return 0, 'duplicate', '' end
  local cost = costField(tonumber(v[6] or '0') + tonumber(ARGV[o + 4]))
  local outcome = ARGV[o + 7]
  if outcome == 'ok' then
    redis.call('HSET', key, 'lastTick', ARGV[o + 3], 'costMicrocents', cost, ` +
  `'inferencesCompleted', tostring(tonumber(v[7] or '0') + 1), 'lastInferenceMs', ARGV[o + 8])
  elseif outcome == 'failed' then
    redis.call('HSET', key, 'lastTick', ARGV[o + 3], 'costMicrocents', cost, ` +
  `'inferencesFailed', tostring(tonumber(v[8] or '0') + 1), 'lastInferenceMs', ARGV[o + 8])
  else
    redis.call('HSET', key, 'lastTick', ARGV[o + 3], 'costMicrocents', cost)
  end
  redis.call('PUBLISH', ARGV[o + 5], ARGV[o + 6])
  return 1, v[5] or '0', v[9] or '0'
end
local out = {}
for k = 1, #KEYS do
  local ok, value, lease = commit(KEYS[k], (k - 1) * 8)
  out[3 * k - 2] = ok
  out[3 * k - 1] = value
  out[3 * k] = lease
end
return out`;

/** KEYS[1] record hash; ARGV field, value pairs. 1 when written, 0 when the hash exists. */
const RESTORE = `if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV))
return 1`;

/** KEYS[1] record hash; ARGV field, value pairs. The record after the patch, or nil when absent. */
const UPDATE = `if redis.call('EXISTS', KEYS[1]) == 0 then return false end
redis.call('HSET', KEYS[1], unpack(ARGV))
return redis.call('HGETALL', KEYS[1])`;

// ── Fleet membership, on Redis's clock.
/** KEYS replicas zset; ARGV replica. Records the heartbeat on Redis's clock; returns that time. */
const HEARTBEAT = `${NOW_MS}
redis.call('ZADD', KEYS[1], now, ARGV[1])
return now`;

/** KEYS replicas zset. {now, {replica, at, ...}} on Redis's clock. */
const MEMBERS = `${NOW_MS}
return {now, redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')}`;

// ── Pub/sub.
/** KEYS[1] only routes (a Cluster runs it on that key's node); ARGV channel, message. */
const PUBLISH_FROM = `redis.call('PUBLISH', ARGV[1], ARGV[2])
return 0`;

// ── Feedback of one account (its keys share the account's tag).
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

// ── Telemetry counters.
/**
 * KEYS the hashes; ARGV for each hash in turn: its number of triples n, then n (op, field, value)
 * triples, op '+' add, '<' lower to, '>' raise to. One read and one write per hash, every hash of a
 * telemetry flush in one call; numbers written back with full double precision.
 */
const HBATCH = `local a = 1
for k = 1, #KEYS do
  local n = tonumber(ARGV[a])
  local fields = {}
  for i = 1, n do fields[i] = ARGV[a + 3 * i - 1] end
  local cur = redis.call('HMGET', KEYS[k], unpack(fields))
  local vals, order = {}, {}
  for i = 1, n do
    local f, op, v = fields[i], ARGV[a + 3 * i - 2], tonumber(ARGV[a + 3 * i])
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
  redis.call('HSET', KEYS[k], unpack(out))
  a = a + 1 + 3 * n
end
return 0`;
/** Fields per HBATCH call, all its hashes together: Lua's unpack() has a stack limit (~8000 values). */
export const HBATCH_FIELDS = 1_000;

/**
 * The Lua scripts, each defined on the command connection as an ioredis command (`defineCommand`:
 * called by SHA1, loaded again after a Redis restart), with its number of keys (undefined: the
 * call's first argument gives it).
 */
const SCRIPTS = {
  acquireLua: [ACQUIRE, 2],
  releaseLua: [RELEASE, 2],
  bindLua: [BIND, 2],
  restoreSlotLua: [RESTORE_SLOT, 2],
  endLua: [END, 1],
  renewLua: [RENEW, 1],
  setPromptLua: [SET_PROMPT, 1],
  addCostLua: [ADD_COST, 1],
  claimLua: [CLAIM, 1],
  commitTicksLua: [COMMIT_TICKS, undefined],
  publishFromLua: [PUBLISH_FROM, 1],
  heartbeatLua: [HEARTBEAT, 1],
  membersLua: [MEMBERS, 1],
  updateLua: [UPDATE, 1],
  restoreLua: [RESTORE, 1],
  addFeedbackLua: [ADD_FEEDBACK, 5],
  feedbackPageLua: [FEEDBACK_PAGE, 4],
  schedulePruneLua: [SCHEDULE_PRUNE, 1],
  hbatchLua: [HBATCH, undefined],
} as const satisfies Record<string, readonly [string, number | undefined]>;

type ScriptName = keyof typeof SCRIPTS;
/** A connection with the scripts defined on it. */
export type WithScripts<C> = C & Record<ScriptName, (...keysThenArgs: (string | number)[]) => Promise<unknown>>;

export function defineScripts<C extends Redis | Cluster>(conn: C): WithScripts<C> {
  for (const [name, [lua, numberOfKeys]] of Object.entries(SCRIPTS)) conn.defineCommand(name, { lua, numberOfKeys });
  return conn as WithScripts<C>;
}

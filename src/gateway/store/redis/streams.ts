import type { OwnerFence, StreamRecord, StreamRecords, TickCommit, TickCommitInput } from '../store';
import { RedisRole } from './role';
import type { RedisContext } from './role';
import { TickBatch } from './tick-batch';

/**
 * Stream records, one hash each, and the fleet's operations on them. Each script touches one
 * record's hash (one hash tag). The owner index (`owned:{replica}`) lives on the replica's tag, so it
 * cannot change in the same script: a new owner is added BEFORE the script (a lost reply still
 * leaves the stream findable by streamsOf of its new owner) and the old one removed after it,
 * best effort (a call that changed the record must not throw, or its caller would retry and lose:
 * an end's winner would never release the slot). The record's owner field is the truth; streamsOf
 * filters by it.
 */
export class RedisStreams extends RedisRole implements StreamRecords {
  private readonly ticks: TickBatch;

  /** @param commitBatchMs how long tick commits are gathered into one script call (./tick-batch.ts). */
  constructor(context: RedisContext, commitBatchMs = 0) {
    super(context);
    this.ticks = new TickBatch(this.redis, commitBatchMs);
  }

  async putRecord(rec: StreamRecord): Promise<void> {
    return this.guard('putRecord', async () => {
      const key = this.key.record(rec.streamId);
      if (rec.state === 'active') await this.indexOwner(rec.streamId, rec.owner);
      await this.redis
        .multi()
        .del(key)
        .hset(key, ...encode(rec))
        .exec();
    });
  }

  async restoreRecord(rec: StreamRecord): Promise<boolean> {
    return this.guard('restoreRecord', async () => {
      // Indexed first: an index entry without its record is filtered by streamsOf.
      if (rec.state === 'active') await this.indexOwner(rec.streamId, rec.owner);
      return (await this.redis.restoreLua(this.key.record(rec.streamId), ...encode(rec))) === 1;
    });
  }

  async getRecord(streamId: string): Promise<StreamRecord | undefined> {
    return this.guard('getRecord', async () => {
      const h = await this.redis.hgetall(this.key.record(streamId));
      return Object.keys(h).length ? decode(h) : undefined;
    });
  }

  async updateRecord(streamId: string, patch: Partial<StreamRecord>): Promise<StreamRecord | undefined> {
    return this.guard('updateRecord', async () => {
      const fields = encode(patch);
      if (!fields.length) return this.getRecord(streamId);
      if (patch.owner) await this.indexOwner(streamId, patch.owner);
      const flat = (await this.redis.updateLua(this.key.record(streamId), ...fields)) as string[] | null;
      return flat ? decode(flat) : undefined;
    });
  }

  async expireRecord(streamId: string, afterMs: number): Promise<void> {
    return this.guard('expireRecord', async () => {
      const key = this.key.record(streamId);
      const acct = await this.redis.hget(key, 'accountId');
      if (acct === null) return;
      // The feedback drop is scheduled first and the record expires at that same instant (Redis's
      // clock), so once the record is gone its feedback is due too.
      const at = (await this.redis.schedulePruneLua(this.key.feedbackPrune(JSON.parse(acct) as string), streamId, afterMs)) as number;
      await this.redis.pexpireat(key, at);
    });
  }

  async endStream(streamId: string, reason: string, endedAtMs: number, fence?: OwnerFence): Promise<StreamRecord | undefined> {
    return this.guard('endStream', async () => {
      const ended = encode({ state: 'ended', endReason: reason, endedAtMs, owner: null, sealedKey: '' });
      const fenceArgs = fence ? [JSON.stringify(fence.owner), String(fence.epoch)] : ['', ''];
      const flat = (await this.redis.endLua(this.key.record(streamId), ...fenceArgs, ...ended)) as string[] | null;
      if (!flat) return undefined;
      const before = decode(flat);
      await this.unindexOwner(streamId, before.owner);
      return before;
    });
  }

  async renewLease(
    streamId: string,
    leaseExpiresAtMs: number,
    nowMs: number,
  ): Promise<{ costMicrocents: number; sinceMs: number } | undefined> {
    return this.guard('renewLease', async () => {
      const reply = (await this.redis.renewLua(this.key.record(streamId), JSON.stringify(leaseExpiresAtMs), JSON.stringify(nowMs))) as
        [string, string] | null;
      if (!reply) return undefined;
      return { costMicrocents: JSON.parse(reply[0]) as number, sinceMs: JSON.parse(reply[1]) as number };
    });
  }

  async setPrompt(streamId: string, prompt: string, atMs: number): Promise<StreamRecord | undefined> {
    return this.guard('setPrompt', async () => {
      const flat = (await this.redis.setPromptLua(this.key.record(streamId), JSON.stringify(prompt), JSON.stringify(atMs))) as
        string[] | null;
      return flat ? decode(flat) : undefined;
    });
  }

  async addCost(streamId: string, costMicrocents: number): Promise<boolean> {
    return this.guard('addCost', async () => (await this.redis.addCostLua(this.key.record(streamId), costMicrocents)) === 1);
  }

  async claimStream(streamId: string, expect: { owner: string | null; epoch: number }, owner: string): Promise<StreamRecord | undefined> {
    return this.guard('claimStream', async () => {
      await this.indexOwner(streamId, owner);
      const flat = (await this.redis.claimLua(
        this.key.record(streamId),
        JSON.stringify(expect.owner),
        expect.epoch,
        JSON.stringify(owner),
      )) as string[] | null;
      if (!flat) return undefined;
      if (expect.owner !== owner) await this.unindexOwner(streamId, expect.owner);
      return decode(flat);
    });
  }

  /**
   * One script (the fence, lastTick, the cost and the PUBLISH), sent with the other commits of this
   * turn of the event loop (./tick-batch.ts): one round trip, and one EVALSHA for the batch.
   */
  async commitTick(streamId: string, c: TickCommitInput): Promise<TickCommit> {
    return this.guard('commitTick', async () => {
      const outcome = c.outcome ? (c.outcome.ok ? 'ok' : 'failed') : '';
      const ms = c.outcome ? String(Math.max(0, Math.round(c.outcome.inferenceMs))) : '0';
      const [ok, value, lease] = await this.ticks.commit(this.key.record(streamId), [
        JSON.stringify(c.owner),
        c.epoch,
        c.tick,
        c.costMicrocents,
        this.key.channel(c.channel),
        c.message,
        outcome,
        ms,
      ]);
      if (ok !== 1) return { ok: false, reason: value as 'fenced' | 'duplicate' | 'ended' | 'missing' };
      return { ok: true, promptRev: JSON.parse(value) as number, leaseExpiresAtMs: JSON.parse(lease) as number };
    });
  }

  /**
   * The index, filtered by each record (active and owned by `replica`). Entries of ended streams are
   * dropped (ended is final; a crash between an end and its index update leaves them). Entries now
   * owned by another replica are only filtered: dropping them could race a claim back to `replica`.
   * `vouched` ids are not read: a replica's periodic reconcile then costs one SMEMBERS, not a read
   * per stream it runs.
   */
  async streamsOf(replica: string, vouched?: ReadonlySet<string>): Promise<string[]> {
    return this.guard('streamsOf', async () => {
      const key = this.key.owned(replica);
      const indexed = await this.redis.smembers(key);
      const trusted = vouched ? indexed.filter((id) => vouched.has(id)) : [];
      const ids = vouched ? indexed.filter((id) => !vouched.has(id)) : indexed;
      if (!ids.length) return trusted;
      const owner = JSON.stringify(replica);
      const rows = await Promise.all(ids.map((id) => this.redis.hmget(this.key.record(id), 'state', 'owner')));
      const ended = ids.filter((_, i) => rows[i][0] === '"ended"');
      if (ended.length) await this.redis.srem(key, ...ended);
      return [...trusted, ...ids.filter((_, i) => rows[i][0] === '"active"' && rows[i][1] === owner)];
    });
  }

  async indexedStreams(replicas: readonly string[]): Promise<Set<string>> {
    return this.guard('indexedStreams', async () => {
      const sets = await Promise.all(replicas.map((r) => this.redis.smembers(this.key.owned(r))));
      return new Set(sets.flat());
    });
  }

  private async indexOwner(streamId: string, owner: string | null): Promise<void> {
    if (owner !== null) await this.redis.sadd(this.key.owned(owner), streamId);
  }

  private async unindexOwner(streamId: string, owner: string | null): Promise<void> {
    if (owner === null) return;
    await this.redis.srem(this.key.owned(owner), streamId).catch((err: unknown) => {
      this.log?.warn({ err: err instanceof Error ? err.message : String(err), streamId }, 'owner index not updated (streamsOf filters it)');
    });
  }
}

/** A record as hash fields, each value JSON (an undefined field is not written). */
function encode(rec: Partial<StreamRecord>): string[] {
  return Object.entries(rec).flatMap(([k, v]) => (v === undefined ? [] : [k, JSON.stringify(v)]));
}

function decode(flat: string[] | Record<string, string>): StreamRecord {
  const entries = Array.isArray(flat)
    ? Array.from({ length: flat.length / 2 }, (_, i) => [flat[2 * i], flat[2 * i + 1]])
    : Object.entries(flat);
  return Object.fromEntries(entries.map(([k, v]) => [k, JSON.parse(v) as unknown])) as unknown as StreamRecord;
}

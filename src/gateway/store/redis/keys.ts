/**
 * The Redis store's key layout: every key, SCAN pattern and channel name is built here.
 *
 * `P` is the prefix (`lg:` by default; tests give each store its own). Keys a script touches together
 * share a hash tag (`{…}`), so a Redis Cluster runs every script unchanged on the node owning it.
 *   P slots:{keyHash}          ZSET   member slot id, score acquire time (Redis TIME, ms). One slot per member.
 *   P slotinfo:{keyHash}       HASH   r:<slot id> → replica that acquired it, s:<slot id> → stream bound.
 *   P session:{streamId}       HASH   StreamRecord, each field JSON-encoded. PEXPIREAT = tombstone end.
 *                                     The record scripts (restore, update, end, renew, prompt, cost,
 *                                     claim, commitTick) touch only it.
 *   P owned:{replica}          SET    stream ids owned by the replica: an index added to before a put/claim
 *                                     and removed from after a claim/end (not atomically; the record's
 *                                     owner is the truth, streamsOf filters by it).
 *   P replicas                 ZSET   replica id, score its last heartbeat (Redis TIME, ms).
 *   P draining                 SET    replica ids draining (no handover or failover targets).
 *   P impaired                 SET    replica ids that cannot reach the upstream (no handover or failover targets).
 *   P once:{key}               STRING claimOnce marker (SET NX PX).
 *   P rw:{rw<shard>}:<bucket>  HASH   result id → its window for reinfer (ResultWindow JSON with its own
 *                                     expiry): the windows written in one 15 s bucket whose result id falls
 *                                     in the shard (4); PEXPIREAT = the bucket's end plus their TTL.
 *   P fb:{acct}                ZSET   feedback seq (member = score), the account's entries oldest first.
 *   P fbe:{acct}               HASH   seq → FeedbackRecord JSON.
 *   P fbn:{acct}               HASH   streamId → entries of that stream (the per-stream cap).
 *   P fbs:{acct}:<streamId>    SET    seqs of one stream's entries (dropped with the stream).
 *   P fbprune:{acct}           ZSET   streamId, score = when its feedback goes (its tombstone's end).
 *   P fbseq:{acct}             STRING the account's feedback counter (page cursor).
 *   P h:<name>                 HASH   telemetry counters (usage report), numbers as decimal strings.
 *   P ch:<channel>             pub/sub channel, not a key: `results:<streamId>` (results fan-out, and
 *                                     commitTick's PUBLISH), `control:<replica>` (the fleet's messages).
 *                                     On a Cluster published from the node of session:{<route>} (`publish`).
 * Times compared inside scripts are Redis's (`TIME`), so clock skew between replicas does not matter.
 */
/** The prefix of every key and channel unless the store is given another. */
export const DEFAULT_PREFIX = 'lg:';

export class RedisKeys {
  constructor(readonly prefix: string) {}

  slots(keyHash: string): string {
    return `${this.prefix}slots:{${keyHash}}`;
  }

  slotInfo(keyHash: string): string {
    return `${this.prefix}slotinfo:{${keyHash}}`;
  }

  /** SCAN pattern of every slots key (an empty ZSET does not exist, so each found holds a slot). */
  slotsPattern(): string {
    return `${escapeGlob(this.slots('').slice(0, -1))}*`;
  }

  /** The key hash of a key `slotsPattern` found; undefined for one that only starts alike. */
  keyHashOfSlots(key: string): string | undefined {
    return key.endsWith('}') ? key.slice(this.slots('').length - 1, -1) : undefined;
  }

  /** A stream's record; its key is named `session:` in the stored layout every replica of a fleet shares. */
  record(streamId: string): string {
    return `${this.prefix}session:{${streamId}}`;
  }

  owned(replica: string): string {
    return `${this.prefix}owned:{${replica}}`;
  }

  replicas(): string {
    return `${this.prefix}replicas`;
  }

  draining(): string {
    return `${this.prefix}draining`;
  }

  impaired(): string {
    return `${this.prefix}impaired`;
  }

  once(key: string): string {
    return `${this.prefix}once:{${key}}`;
  }

  /** A bucket's hash of one shard's result windows; a shard's buckets share one hash tag. */
  resultWindows(shard: number, bucket: number): string {
    return `${this.prefix}rw:{rw${shard}}:${bucket}`;
  }

  /** An account's feedback keys in the order the feedback scripts take them: fb, fbe, fbn, fbprune, fbseq. */
  feedback(accountId: string): string[] {
    const t = `{${accountId}}`;
    const p = this.prefix;
    return [`${p}fb:${t}`, `${p}fbe:${t}`, `${p}fbn:${t}`, this.feedbackPrune(accountId), `${p}fbseq:${t}`];
  }

  feedbackPrune(accountId: string): string {
    return `${this.prefix}fbprune:{${accountId}}`;
  }

  /** A stream's entry set is this plus its stream id (the scripts append it, on the account's tag). */
  feedbackStreamPrefix(accountId: string): string {
    return `${this.prefix}fbs:{${accountId}}:`;
  }

  hash(name: string): string {
    return `${this.prefix}h:${name}`;
  }

  /** SCAN pattern of every hash whose name starts with `namePrefix`. */
  hashPattern(namePrefix: string): string {
    return `${escapeGlob(this.hash(namePrefix))}*`;
  }

  /** The name of a hash key (what `hash` was given). */
  hashName(key: string): string {
    return key.slice(this.hash('').length);
  }

  channel(name: string): string {
    return `${this.prefix}ch:${name}`;
  }

  /** The channel name of a Redis channel `channel` built. */
  channelName(redisChannel: string): string {
    return redisChannel.slice(this.channel('').length);
  }
}

/** A literal for a SCAN MATCH glob. */
function escapeGlob(s: string): string {
  return s.replace(/[*?[\]\\]/g, '\\$&');
}

import { parseResultWindow } from '../result-windows';
import type { ResultWindow, ResultWindows } from '../result-windows';
import { pipelineReplies } from './connection';
import { RedisRole } from './role';
import type { RedisContext } from './role';

/** Windows are written at most this long after their put: the provider persists a clip 1–2 s after its result. */
export const WINDOW_FLUSH_MS = 1_000;
/** How long a window may live unless the store is told (`legacy.resultWindowSeconds`' default). */
export const WINDOW_MAX_TTL_MS = 600_000;
/** Hashes per bucket: each holds the windows whose result id falls in it, so none grows past a few 10,000 fields. */
const SHARDS = 4;
/** Time span of one hash; a read looks through every bucket a live window may be in. */
const BUCKET_MS = 15_000;
/** Windows held for writing at most (Redis unreachable for long): past it the oldest are dropped. */
const MAX_PENDING = 100_000;
/** A window Redis refused is tried again with the next writes for this long (a failover, a short outage), then dropped. */
export const WINDOW_RETRY_MS = 10_000;
/**
 * A hash's expiry is set with this replica's first write to it and again with every this many
 * writes after (one a second): a hash that lost it (a failover that lost the first write) gets it
 * back within seconds, while most writes carry no PEXPIREAT.
 */
export const EXPIRY_EVERY_WRITES = 5;

export interface ResultWindowOptions {
  /** How long windows are put for at most (`legacy.resultWindowSeconds`): how far back a read looks. */
  maxTtlMs?: number;
  /** How long a put waits for the write that carries it. */
  flushMs?: number;
  /** How long a refused window is tried again (WINDOW_RETRY_MS). */
  retryMs?: number;
}

interface Pending {
  json: string;
  until: number;
  putAt: number;
}

interface Flush {
  timer: NodeJS.Timeout;
  done: Promise<void>;
  settle(err?: unknown): void;
}

/**
 * Reinfer's result windows, written behind: a replica gathers the windows of its results and writes
 * them together, once a second, with one HSET per shard into hashes that each hold one shard's
 * windows of one 15-second bucket and expire as a whole. A window is one entry of a hash, not a key
 * with its own TTL, so a result costs no command of its own (a tick's commit stays its only one) and
 * Redis keeps no per-window key. Each entry carries its own expiry (`until`), checked on read, so a
 * window lives exactly its TTL whatever its bucket; a read asks every bucket it may be in, in one
 * pipeline (a shard's buckets share a hash tag, so on a Cluster too).
 *
 * The provider persists a result's clip 1–2 s after the result (spec/legacy-clients.md): until the
 * flush, another replica answers 404 and the client retries; this replica reads its own pending
 * windows at once. A replica that dies loses at most its last second of windows (their reinfer
 * answers 404). A write Redis refuses is tried again with the next ones for WINDOW_RETRY_MS, so the
 * refusals of a failover lose nothing (what the old primary took but had not replicated goes with
 * it); past that the windows are dropped with one log line (the puts of a write whose windows were
 * all dropped reject).
 */
export class RedisResultWindows extends RedisRole implements ResultWindows {
  private pending = new Map<string, Pending>();
  private flushing: Flush | undefined;
  private readonly maxTtlMs: number;
  private readonly flushMs: number;
  private readonly retryMs: number;
  /** The store is closing: a refused write is not tried again. */
  private closing = false;
  /** Writes since this replica last set the expiry of each hash of the bucket it writes now. */
  private expiry = { bucket: -1, writesSince: new Map<string, number>() };

  constructor(context: RedisContext, opts: ResultWindowOptions = {}) {
    super(context);
    this.maxTtlMs = opts.maxTtlMs ?? WINDOW_MAX_TTL_MS;
    this.flushMs = opts.flushMs ?? WINDOW_FLUSH_MS;
    this.retryMs = opts.retryMs ?? WINDOW_RETRY_MS;
  }

  putResultWindow(resultId: string, window: ResultWindow, ttlMs: number): Promise<void> {
    const putAt = Date.now();
    const until = putAt + Math.min(this.maxTtlMs, Math.max(1, Math.round(ttlMs)));
    const done = (this.flushing ??= this.schedule()).done;
    this.pending.delete(resultId); // a later put replaces, and goes last (the oldest are dropped first)
    this.pending.set(resultId, { json: JSON.stringify({ ...window, until }), until, putAt });
    if (this.pending.size > MAX_PENDING) this.pending.delete(this.pending.keys().next().value!);
    return done;
  }

  async getResultWindow(resultId: string): Promise<ResultWindow | undefined> {
    const own = this.pending.get(resultId);
    if (own) return parseLive(own.json);
    return this.guard('getResultWindow', async () => {
      // Newest bucket first: a later put for the same id wins. One bucket either side for clock skew.
      const now = Date.now();
      const read = this.redis.pipeline();
      for (let b = bucketOf(now) + 1; b >= bucketOf(now - this.maxTtlMs) - 1; b--)
        read.hget(this.key.resultWindows(shardOf(resultId), b), resultId);
      for (const text of await pipelineReplies(read)) {
        const w = parseLive(text as string | null);
        if (w) return w;
      }
      return undefined;
    });
  }

  /** Writes what is pending now (the store is closing); resolves whether or not Redis took it. */
  async flushNow(): Promise<void> {
    this.closing = true;
    if (!this.flushing) return;
    clearTimeout(this.flushing.timer);
    await this.flush();
  }

  private schedule(): Flush {
    let settle!: (err?: unknown) => void;
    const done = new Promise<void>((resolve, reject) => (settle = (err) => (err === undefined ? resolve() : reject(err))));
    // Nobody may await a put: a failed flush must not be an unhandled rejection.
    done.catch(() => undefined);
    const timer = setTimeout(() => void this.flush(), this.flushMs);
    timer.unref();
    return { timer, done, settle };
  }

  private async flush(): Promise<void> {
    const batch = this.flushing;
    const entries = this.pending;
    this.flushing = undefined;
    this.pending = new Map();
    if (!batch) return;
    try {
      await this.guard('putResultWindow', () => this.write(entries));
      batch.settle();
    } catch (err) {
      this.retry(entries, batch, err);
    }
  }

  /** Puts the refused windows that are young enough back in line (a newer put of an id wins); the rest are dropped. */
  private retry(entries: Map<string, Pending>, batch: Flush, err: unknown): void {
    const now = Date.now();
    let kept = 0;
    let dropped = 0;
    for (const [id, w] of entries) {
      if (this.pending.has(id)) continue;
      if (this.closing || now - w.putAt >= this.retryMs) dropped++;
      else {
        this.pending.set(id, w);
        kept++;
      }
    }
    if (dropped) this.log?.warn({ windows: dropped }, 'result windows dropped: the store refused them too long');
    if (dropped && !kept) return batch.settle(err);
    // The puts of this batch settle with the write that carries their windows now.
    (this.flushing ??= this.schedule()).done.then(
      () => batch.settle(),
      (e: unknown) => batch.settle(e),
    );
  }

  private async write(entries: Map<string, Pending>): Promise<void> {
    const now = Date.now();
    const bucket = bucketOf(now);
    const shards: string[][] = Array.from({ length: SHARDS }, () => []);
    for (const [id, w] of entries) shards[shardOf(id)]!.push(id, w.json);
    // A hash goes when the latest window that may be written to it would: one put at its bucket's end for the longest TTL.
    const expireAt = (bucket + 1) * BUCKET_MS + this.maxTtlMs;
    if (this.expiry.bucket !== bucket) this.expiry = { bucket, writesSince: new Map() };
    const { writesSince } = this.expiry;
    const expiring: string[] = [];
    const writes: Promise<unknown>[] = [];
    shards.forEach((fields, s) => {
      if (!fields.length) return;
      const key = this.key.resultWindows(s, bucket);
      writes.push(this.redis.hset(key, ...fields));
      const since = writesSince.get(key);
      if (since === undefined || since >= EXPIRY_EVERY_WRITES) {
        writes.push(this.redis.pexpireat(key, expireAt));
        expiring.push(key);
      } else writesSince.set(key, since + 1);
    });
    await Promise.all(writes);
    // Counted once Redis took it: a refused write sets it again with the next one.
    for (const key of expiring) writesSince.set(key, 1);
  }
}

function bucketOf(ms: number): number {
  return Math.floor(ms / BUCKET_MS);
}

/** The shard of a result id: its first character (result ids are hex UUIDs; any other id works too). */
function shardOf(resultId: string): number {
  return resultId.charCodeAt(0) % SHARDS;
}

/** A stored window, unless it is past its own expiry. */
function parseLive(text: string | null | undefined): ResultWindow | undefined {
  const w = parseResultWindow(text);
  if (!w) return undefined;
  const { until } = JSON.parse(text!) as { until?: unknown };
  return typeof until === 'number' && until > Date.now() ? w : undefined;
}

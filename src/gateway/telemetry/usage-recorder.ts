/**
 * Records who still uses /v0.2, with what: per-key counters kept in the store (so they survive what
 * the store survives and are shared by replicas; layout in ./usage-keys.ts).
 *
 * Writes are buffered per replica (CounterBuffer) and flushed every FLUSH_MS as one `store.hbatch`:
 * the store's cost is per flush and hash, not per tick. What is news is written at once instead: a
 * key's first /v0.2 request on this replica, its first on a route or a UTC day, and its first stream
 * of the day; so a crash costs at most the last FLUSH_MS of figures, never a key, its last-seen or
 * the routes it used. A flush the store refuses (outage) is kept and retried every FLUSH_MS (up to
 * RETAINED_HASHES hashes), so an outage costs no counters unless the process dies in it.
 */
import type { Logger } from '../../lib/logger';
import { realClock } from '../../lib/timers';
import { setLongTimeout } from '../../lib/timers';
import type { Clock, LongTimer } from '../../lib/timers';
import type { RefusalReason } from '../legacy';
import type { Counters } from '../store/store';
import { CounterBuffer } from './counter-buffer';
import { HISTORY_DAYS, MAX_FAMILIES_PER_KEY } from './migration';
import { DAY_MS, PER_DAY, PER_KEY, PER_KEY_ACCOUNTS, PER_KEY_PASSTHROUGH, utcDay } from './usage-keys';
import { LRUCache } from 'lru-cache';

/** Keys whose per-process write state (last pruned day, families seen) is remembered. */
const MEMO_KEYS = 10_000;
/**
 * Counter writes are summed in process and written at most this often (or at this many pending
 * hashes): what a crash loses, and what the counters cost the store (a flush reads and writes each
 * hash it names, and a replica names every key it served since the last one).
 */
const FLUSH_MS = 15_000;
const PENDING_HASHES = 1_000;
/** While the store refuses flushes, counters are kept for the next one, up to this many hashes. */
const RETAINED_HASHES = 20_000;

/** Per key, this process's last written day (old day fields are pruned when it changes) and families. */
type KeyMemo = LRUCache<string, { day: string; families: Set<string> }>;

/** Per key, what this process has written through today: its routes, and `STREAM_NEWS` once it created a stream. */
type NewsMemo = LRUCache<string, { day: string; seen: Set<string> }>;
const STREAM_NEWS = 'stream';

/** A key's passthrough calls since the last flush. */
interface PendingPassthrough {
  first: number;
  last: number;
  v1beta: number;
  billing: number;
  families: Map<string, number>;
}

/** What a created stream contributes (a StreamSpec fits). */
export interface StreamTraits {
  transport: string;
  mode: string;
  backend: string;
  model: string;
  deprecatedFields: readonly string[];
}

/** Counts each /v0.2 event (and a key's passthrough calls) into its key's and its day's hashes, buffered. */
export class UsageRecorder {
  private readonly pending = new Set<Promise<void>>();
  private readonly seen: KeyMemo = new LRUCache({ max: MEMO_KEYS });
  private readonly seenPassthrough: KeyMemo = new LRUCache({ max: MEMO_KEYS });
  private readonly news: NewsMemo = new LRUCache({ max: MEMO_KEYS });
  /** Counter writes since the last flush: events (ticks, requests, passthrough calls) cost a Map update. */
  private readonly buffer = new CounterBuffer();
  private readonly ptPending = new Map<string, PendingPassthrough>();
  private readonly flushHooks: (() => void)[] = [];
  private flushTimer: LongTimer | undefined;
  /** Consecutive failed flushes: an outage is logged once when it starts and once when it ends. */
  private failedFlushes = 0;
  private closed = false;
  private dayStart = -Infinity;
  private dayName = '';

  /**
   * @param flushMs how long counter writes are held (summed) before one `store.hbatch` writes them:
   *   what a crash loses at most, and what bounds the store commands per stream-second.
   * @param clock the time of the counters and of the flush timer.
   */
  constructor(
    private readonly store: Counters,
    private readonly logger: Logger,
    private readonly clock: Clock = realClock,
    private readonly flushMs = FLUSH_MS,
  ) {}

  /** One authenticated legacy request (or results-socket connection) by endpoint; `family` from clientFamily(). */
  request(keyHash: string, endpoint: string, accountId?: string, family?: string): void {
    const t = this.clock.now();
    const day = this.today(t);
    const k = this.buffer.hash(PER_KEY, keyHash);
    k.lower('first_seen_ms', t);
    k.raise('last_seen_ms', t);
    k.add(`req:${endpoint}`);
    k.add(`day:${day}`);
    if (family) k.add(`ua:${this.boundedFamily(this.seen, keyHash, family)}`);
    const d = this.buffer.hash(PER_DAY, day);
    d.add('requests');
    d.add(`key:${keyHash}`);
    if (accountId) this.buffer.hash(PER_KEY_ACCOUNTS, keyHash).raise(accountId, t);
    this.flushNewsNow(keyHash, endpoint, day);
    this.pruneOnNewDay(keyHash, day, t);
  }

  /**
   * A /v1beta or /billing call made with a key (status < 400: the upstream accepted the key). The
   * passthrough is the hottest path: a call updates a plain record, moved into the buffer at flush.
   */
  passthrough(keyHash: string, prefix: 'v1beta' | 'billing', family: string): void {
    const t = this.clock.now();
    let p = this.ptPending.get(keyHash);
    if (!p) this.ptPending.set(keyHash, (p = { first: t, last: t, v1beta: 0, billing: 0, families: new Map() }));
    p.last = t;
    p[prefix]++;
    const f = this.boundedFamily(this.seenPassthrough, keyHash, family);
    p.families.set(f, (p.families.get(f) ?? 0) + 1);
    this.scheduleFlush();
  }

  /** A legacy call refused by a brownout or after the sunset. */
  refused(keyHash: string, reason: RefusalReason): void {
    this.buffer.hash(PER_KEY, keyHash).add(`refused:${reason}`);
    this.scheduleFlush();
  }

  streamCreated(keyHash: string, s: StreamTraits): void {
    const k = this.buffer.hash(PER_KEY, keyHash);
    k.add('streams');
    k.add(`source:${s.transport}`);
    k.add(`mode:${s.mode}`);
    k.add(`backend:${s.backend}`);
    k.add(`model:${s.model}`);
    for (const f of s.deprecatedFields) k.add(`field:${f}`);
    const day = this.today();
    this.buffer.hash(PER_DAY, day).add('streams');
    this.flushNewsNow(keyHash, STREAM_NEWS, day);
  }

  streamEnded(keyHash: string, reason: string): void {
    this.buffer.hash(PER_KEY, keyHash).add(`end:${reason}`);
    this.scheduleFlush();
  }

  /** Once per tick of every stream: the reason the counters are buffered. */
  inference(keyHash: string, ok: boolean, outputTokens: number): void {
    const k = this.buffer.hash(PER_KEY, keyHash);
    const d = this.buffer.hash(PER_DAY, this.today());
    k.add(ok ? 'inferences:ok' : 'inferences:failed');
    d.add('inferences');
    if (outputTokens > 0) {
      k.add('output_tokens', outputTokens);
      d.add('output_tokens', outputTokens);
    }
    this.scheduleFlush();
  }

  socketOpened(keyHash: string): void {
    this.buffer.hash(PER_KEY, keyHash).add('ws_connections');
    this.buffer.hash(PER_DAY, this.today()).add('ws_connections');
    this.scheduleFlush();
  }

  /** `hook` runs first in every `flush()`: a caller that holds events back hands them over first. */
  beforeFlush(hook: () => void): void {
    this.flushHooks.push(hook);
  }

  /** Writes the buffered counters now, and resolves once every counter write has landed (shutdown, reports, tests). */
  async flush(): Promise<void> {
    for (const hook of this.flushHooks) hook();
    this.writeBuffer();
    while (this.pending.size) await Promise.all([...this.pending]);
  }

  /** A last flush; then no timer is armed again (what a failing store refused now stays unwritten). */
  async close(): Promise<void> {
    this.closed = true;
    await this.flush();
    this.flushTimer?.clear();
    this.flushTimer = undefined;
  }

  /** The UTC day of `t`, its string remembered until the day ends (a tick need not format a date). */
  private today(t = this.clock.now()): string {
    if (t < this.dayStart || t >= this.dayStart + DAY_MS) {
      this.dayStart = t - (t % DAY_MS);
      this.dayName = utcDay(t);
    }
    return this.dayName;
  }

  /**
   * A flush within `flushMs`, or at once when many keys are pending (memory stays bounded), but not
   * while the store is failing: then one try per interval, not one per event.
   */
  private scheduleFlush(): void {
    if (this.buffer.size + this.ptPending.size >= PENDING_HASHES && !this.failedFlushes) this.writeBuffer();
    else this.armFlushTimer();
  }

  /**
   * Writes the buffer at once when `what` is news for the key today (see the head of this file),
   * else schedules the flush as usual. Issued before the request goes on, so the store has it before
   * anything the request writes after it (one connection, commands in order). Not while the store
   * is failing: the retry timer owns that.
   */
  private flushNewsNow(keyHash: string, what: string, day: string): void {
    let m = this.news.get(keyHash);
    if (!m || m.day !== day) this.news.set(keyHash, (m = { day, seen: new Set() }));
    if (m.seen.has(what) || this.failedFlushes || this.closed) return this.scheduleFlush();
    m.seen.add(what);
    this.writeBuffer();
  }

  private armFlushTimer(): void {
    if (this.closed || this.flushTimer) return;
    this.flushTimer = setLongTimeout(() => this.writeBuffer(), this.flushMs, { clock: this.clock });
  }

  private writeBuffer(): void {
    this.flushTimer?.clear();
    this.flushTimer = undefined;
    for (const [keyHash, p] of this.ptPending) {
      const h = this.buffer.hash(PER_KEY_PASSTHROUGH, keyHash);
      h.lower('first_seen_ms', p.first);
      h.raise('last_seen_ms', p.last);
      if (p.v1beta) h.add('v1beta', p.v1beta);
      if (p.billing) h.add('billing', p.billing);
      for (const [f, n] of p.families) h.add(`ua:${f}`, n);
    }
    this.ptPending.clear();
    if (!this.buffer.size) return;
    const updates = this.buffer.take();
    this.track(
      this.store.hbatch(updates).then(
        () => {
          if (this.failedFlushes) this.logger.info({ failedFlushes: this.failedFlushes }, 'deprecation counters written again');
          this.failedFlushes = 0;
        },
        (err: unknown) => {
          if (this.failedFlushes++ === 0)
            this.logger.warn({ err, hashes: updates.length }, 'deprecation counter write failed (counters kept for the next flush)');
          // Kept for the next flush (a batch that timed out may have landed: its increments would
          // count twice; first/last seen stay exact). Past the bound, dropped.
          if (this.buffer.size + updates.length <= RETAINED_HASHES) this.buffer.restore(updates);
          else this.logger.warn({ hashes: updates.length }, 'deprecation counters dropped: the store has refused them too long');
          this.armFlushTimer();
        },
      ),
    );
  }

  private memo(map: KeyMemo, keyHash: string): { day: string; families: Set<string> } {
    let m = map.get(keyHash);
    if (!m) {
      map.set(keyHash, (m = { day: '', families: new Set() }));
    }
    return m;
  }

  /** At most MAX_FAMILIES_PER_KEY distinct families per key and process; later ones are `other`. */
  private boundedFamily(map: KeyMemo, keyHash: string, family: string): string {
    const { families } = this.memo(map, keyHash);
    if (families.has(family)) return family;
    if (families.size >= MAX_FAMILIES_PER_KEY) return 'other';
    families.add(family);
    return family;
  }

  /** The first write of a key on a new day (in this process) drops its day fields older than HISTORY_DAYS. */
  private pruneOnNewDay(keyHash: string, day: string, t: number): void {
    const m = this.memo(this.seen, keyHash);
    if (m.day === day) return;
    m.day = day;
    const oldest = utcDay(t - (HISTORY_DAYS - 1) * DAY_MS);
    this.track(
      (async () => {
        const fields = Object.keys(await this.store.hgetall(PER_KEY + keyHash));
        const stale = fields.filter((f) => f.startsWith('day:') && f.slice(4) < oldest);
        if (stale.length) await this.store.hdel(PER_KEY + keyHash, stale);
      })().catch((err: unknown) => this.logger.warn({ err }, 'deprecation day prune failed')),
    );
  }

  /** Store writes never fail the request or tick that caused them (their failures are logged); flush() awaits them. */
  private track(p: Promise<void>): void {
    const done = p.finally(() => this.pending.delete(done));
    this.pending.add(done);
  }
}

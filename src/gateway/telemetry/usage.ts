/**
 * Who still uses /v0.2, with what: per-key counters kept in the store (so they survive what the
 * store survives and are shared by replicas), and the report built from them. Keys appear only as
 * their hash; account ids (not secrets) let an operator find the customer.
 *
 * Store layout (all hashes of numbers):
 *   depr:key:<keyHash>   first_seen_ms, last_seen_ms, req:<endpoint>, streams, source:<s>, mode:<m>,
 *                        field:<f>, backend:<b>, model:<m>, inferences:ok|failed, output_tokens,
 *                        ws_connections, end:<reason>, day:<YYYY-MM-DD> (legacy requests, last HISTORY_DAYS
 *                        days), ua:<client family>, refused:<brownout|sunset>
 *   depr:pt:<keyHash>    what the same key did through the passthrough: first_seen_ms, last_seen_ms,
 *                        v1beta, billing, ua:<client family>
 *   depr:acct:<keyHash>  <accountId> → last seen ms
 *   depr:day:<YYYY-MM-DD> (UTC) requests, streams, inferences, output_tokens, ws_connections, key:<keyHash>
 *
 * Writes are buffered per replica (CounterBuffer) and flushed every FLUSH_MS as one `store.hbatch`:
 * the store's cost is per flush and hash, not per tick. A crash loses at most the last FLUSH_MS of
 * this replica's counters; a flush the store refuses (outage) is kept and retried every FLUSH_MS
 * (up to RETAINED_HASHES hashes), so an outage costs no counters unless the process dies in it.
 */
import type { Logger } from '../../lib/logger';
import { realClock } from '../../lib/timers';
import { setLongTimeout } from '../../lib/timers';
import type { Clock, LongTimer } from '../../lib/timers';
import type { RefusalReason } from '../legacy';
import type { Counters } from '../store/store';
import { CounterBuffer } from './counter-buffer';
import { HISTORY_DAYS, MAX_FAMILIES_PER_KEY, MIGRATION_STATUSES, migrationStatus } from './migration';
import type { MigrationStatus } from './migration';
import { LRUCache } from 'lru-cache';

const KEY = 'depr:key:';
const ACCT = 'depr:acct:';
const DAY = 'depr:day:';
const PT = 'depr:pt:';
const DAY_MS = 86_400_000;
/** Keys whose per-process write state (last pruned day, families seen) is remembered. */
const MEMO_KEYS = 10_000;
/** Counter writes are summed in process and written at most this often (or at this many pending hashes). */
const FLUSH_MS = 1_000;
const PENDING_HASHES = 1_000;
/** While the store refuses flushes, counters are kept for the next one, up to this many hashes. */
const RETAINED_HASHES = 20_000;

/** Per key, this process's last written day (old day fields are pruned when it changes) and families. */
type KeyMemo = LRUCache<string, { day: string; families: Set<string> }>;

/** A key's passthrough calls since the last flush. */
interface PendingPassthrough {
  first: number;
  last: number;
  v1beta: number;
  billing: number;
  families: Map<string, number>;
}

/** What a created stream contributes (a SessionSpec fits). */
export interface StreamTraits {
  transport: string;
  mode: string;
  backend: string;
  model: string;
  deprecatedFields: readonly string[];
}

export interface KeyUsage {
  key_hash: string;
  account_ids: string[];
  first_seen_at: string | null;
  last_seen_at: string | null;
  requests_total: number;
  /** By endpoint, e.g. `POST /v0.2/streams`, `WS /v0.2/ws/streams/:id`. */
  requests: Record<string, number>;
  streams: { total: number; by_source: Record<string, number>; by_mode: Record<string, number> };
  deprecated_fields: Record<string, number>;
  backends: Record<string, number>;
  models: Record<string, number>;
  inferences: { ok: number; failed: number };
  output_tokens: number;
  websocket_connections: number;
  end_reasons: Record<string, number>;
  migration: KeyMigration;
}

export interface KeyMigration {
  status: MigrationStatus;
  /** Legacy requests per UTC day, last HISTORY_DAYS days, newest first. */
  legacy_daily: Record<string, number>;
  v1beta_requests: number;
  billing_requests: number;
  first_passthrough_at: string | null;
  last_passthrough_at: string | null;
  /** Client families (User-Agent) by interface. */
  client_families: { legacy: Record<string, number>; passthrough: Record<string, number> };
  /** Legacy calls refused by a brownout or after the sunset. */
  refused: Record<RefusalReason, number>;
}

export type ReportSort = 'last_seen' | 'requests' | 'status' | 'key_hash';

export interface ReportOptions {
  /** Days of `daily` (default 31). */
  days?: number;
  /** Only keys in one of these statuses (totals still count every key). */
  status?: readonly MigrationStatus[];
  /** Default `last_seen` descending; `status` in MIGRATION_STATUSES order. */
  sort?: ReportSort;
  order?: 'asc' | 'desc';
}

export interface DayUsage {
  date: string;
  active_keys: number;
  requests: number;
  streams: number;
  inferences: number;
  output_tokens: number;
  websocket_connections: number;
}

export interface DeprecationReport {
  generated_at: string;
  deprecation: { date: string; sunset: string; link: string };
  totals: {
    keys: number;
    requests: number;
    streams: number;
    inferences: number;
    output_tokens: number;
    websocket_connections: number;
    by_status: Record<MigrationStatus, number>;
    refused: Record<RefusalReason, number>;
  };
  /** Per UTC day, newest first. */
  daily: DayUsage[];
  /** Most recently seen first. */
  keys: KeyUsage[];
}

export const utcDay = (ms: number): string => new Date(ms).toISOString().slice(0, 10);

export class DeprecationUsage {
  private readonly pending = new Set<Promise<void>>();
  private readonly seen: KeyMemo = new LRUCache({ max: MEMO_KEYS });
  private readonly seenPassthrough: KeyMemo = new LRUCache({ max: MEMO_KEYS });
  /** Counter writes since the last flush: events (ticks, requests, passthrough calls) cost a Map update. */
  private readonly buffer = new CounterBuffer();
  private readonly ptPending = new Map<string, PendingPassthrough>();
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
    const k = this.buffer.hash(KEY, keyHash);
    k.lower('first_seen_ms', t);
    k.raise('last_seen_ms', t);
    k.add(`req:${endpoint}`);
    k.add(`day:${day}`);
    if (family) k.add(`ua:${this.boundedFamily(this.seen, keyHash, family)}`);
    const d = this.buffer.hash(DAY, day);
    d.add('requests');
    d.add(`key:${keyHash}`);
    if (accountId) this.buffer.hash(ACCT, keyHash).raise(accountId, t);
    this.scheduleFlush();
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
    this.buffer.hash(KEY, keyHash).add(`refused:${reason}`);
    this.scheduleFlush();
  }

  streamCreated(keyHash: string, s: StreamTraits): void {
    const k = this.buffer.hash(KEY, keyHash);
    k.add('streams');
    k.add(`source:${s.transport}`);
    k.add(`mode:${s.mode}`);
    k.add(`backend:${s.backend}`);
    k.add(`model:${s.model}`);
    for (const f of s.deprecatedFields) k.add(`field:${f}`);
    this.buffer.hash(DAY, this.today()).add('streams');
    this.scheduleFlush();
  }

  streamEnded(keyHash: string, reason: string): void {
    this.buffer.hash(KEY, keyHash).add(`end:${reason}`);
    this.scheduleFlush();
  }

  /** Once per tick of every stream: the reason the counters are buffered. */
  inference(keyHash: string, ok: boolean, outputTokens: number): void {
    const k = this.buffer.hash(KEY, keyHash);
    const d = this.buffer.hash(DAY, this.today());
    k.add(ok ? 'inferences:ok' : 'inferences:failed');
    d.add('inferences');
    if (outputTokens > 0) {
      k.add('output_tokens', outputTokens);
      d.add('output_tokens', outputTokens);
    }
    this.scheduleFlush();
  }

  socketOpened(keyHash: string): void {
    this.buffer.hash(KEY, keyHash).add('ws_connections');
    this.buffer.hash(DAY, this.today()).add('ws_connections');
    this.scheduleFlush();
  }

  /** Writes the buffered counters now, and resolves once every counter write has landed (shutdown, reports, tests). */
  async flush(): Promise<void> {
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

  private armFlushTimer(): void {
    if (this.closed || this.flushTimer) return;
    this.flushTimer = setLongTimeout(() => this.writeBuffer(), this.flushMs, { clock: this.clock });
  }

  private writeBuffer(): void {
    this.flushTimer?.clear();
    this.flushTimer = undefined;
    for (const [keyHash, p] of this.ptPending) {
      const h = this.buffer.hash(PT, keyHash);
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
          if (this.failedFlushes++ === 0) this.logger.warn({ err, hashes: updates.length }, 'deprecation counter write failed (counters kept for the next flush)');
          // Kept for the next flush (a batch that timed out may have landed: its increments would
          // count twice; first/last seen stay exact). Past the bound, dropped.
          if (this.buffer.size + updates.length <= RETAINED_HASHES) this.buffer.restore(updates);
          else this.logger.warn({ hashes: updates.length }, 'deprecation counters dropped: the store has refused them too long');
          this.armFlushTimer();
        },
      ),
    );
  }

  async keyCount(): Promise<number> {
    return (await this.store.keys(KEY)).length;
  }

  /** Keys per migration status, as the report's `totals.by_status` counts them, from two hashes per key (not the whole report). */
  async statusCounts(): Promise<Record<MigrationStatus, number>> {
    const keyHashes = (await this.store.keys(KEY)).map((k) => k.slice(KEY.length));
    const now = this.clock.now();
    const statuses = await Promise.all(
      keyHashes.map(async (h) => {
        const [legacy, pt] = await Promise.all([this.store.hgetall(KEY + h), this.store.hgetall(PT + h)]);
        return migrationStatus(legacy.last_seen_ms, pt.last_seen_ms, now);
      }),
    );
    return countByStatus(statuses);
  }

  /** The fleet's report from the shared counters; this replica's buffered ones are written first, so it is never behind itself. */
  async report(deprecation: DeprecationReport['deprecation'], opts: ReportOptions = {}): Promise<DeprecationReport> {
    await this.flush();
    const keyHashes = (await this.store.keys(KEY)).map((k) => k.slice(KEY.length));
    const all = await Promise.all(keyHashes.map((h) => this.keyUsage(h)));
    const byStatus = countByStatus(all.map((k) => k.migration.status));
    const keys = opts.status ? all.filter((k) => opts.status!.includes(k.migration.status)) : all;
    sortKeys(keys, opts.sort ?? 'last_seen', opts.order);
    const dayKeys = (await this.store.keys(DAY)).sort().reverse().slice(0, opts.days ?? 31);
    const daily = await Promise.all(dayKeys.map((k) => this.dayUsage(k.slice(DAY.length))));
    const sum = (f: (k: KeyUsage) => number) => all.reduce((n, k) => n + f(k), 0);
    return {
      generated_at: new Date(this.clock.now()).toISOString(),
      deprecation,
      totals: {
        keys: all.length,
        requests: sum((k) => k.requests_total),
        streams: sum((k) => k.streams.total),
        inferences: sum((k) => k.inferences.ok + k.inferences.failed),
        output_tokens: sum((k) => k.output_tokens),
        websocket_connections: sum((k) => k.websocket_connections),
        by_status: byStatus,
        refused: { brownout: sum((k) => k.migration.refused.brownout), sunset: sum((k) => k.migration.refused.sunset) },
      },
      daily,
      keys,
    };
  }

  async dayUsage(date: string): Promise<DayUsage> {
    const h = await this.store.hgetall(DAY + date);
    return {
      date,
      active_keys: Object.keys(h).filter((f) => f.startsWith('key:')).length,
      requests: h.requests ?? 0,
      streams: h.streams ?? 0,
      inferences: h.inferences ?? 0,
      output_tokens: h.output_tokens ?? 0,
      websocket_connections: h.ws_connections ?? 0,
    };
  }

  private async keyUsage(keyHash: string): Promise<KeyUsage> {
    const [h, accounts, pt] = await Promise.all([
      this.store.hgetall(KEY + keyHash),
      this.store.hgetall(ACCT + keyHash),
      this.store.hgetall(PT + keyHash),
    ]);
    const group = (prefix: string, from = h): Record<string, number> => {
      const out: Record<string, number> = {};
      for (const [field, n] of Object.entries(from)) if (field.startsWith(prefix)) out[field.slice(prefix.length)] = n;
      return out;
    };
    const oldest = utcDay(this.clock.now() - (HISTORY_DAYS - 1) * DAY_MS);
    const daily = Object.entries(group('day:'))
      .filter(([day]) => day >= oldest)
      .sort(([a], [b]) => b.localeCompare(a));
    const iso = (ms: number | undefined) => (ms === undefined ? null : new Date(ms).toISOString());
    const requests = group('req:');
    return {
      key_hash: keyHash,
      account_ids: Object.entries(accounts)
        .sort((a, b) => b[1] - a[1])
        .map(([id]) => id),
      first_seen_at: iso(h.first_seen_ms),
      last_seen_at: iso(h.last_seen_ms),
      requests_total: Object.values(requests).reduce((a, b) => a + b, 0),
      requests,
      streams: { total: h.streams ?? 0, by_source: group('source:'), by_mode: group('mode:') },
      deprecated_fields: group('field:'),
      backends: group('backend:'),
      models: group('model:'),
      inferences: { ok: h['inferences:ok'] ?? 0, failed: h['inferences:failed'] ?? 0 },
      output_tokens: h.output_tokens ?? 0,
      websocket_connections: h.ws_connections ?? 0,
      end_reasons: group('end:'),
      migration: {
        status: migrationStatus(h.last_seen_ms, pt.last_seen_ms, this.clock.now()),
        legacy_daily: Object.fromEntries(daily),
        v1beta_requests: pt.v1beta ?? 0,
        billing_requests: pt.billing ?? 0,
        first_passthrough_at: iso(pt.first_seen_ms),
        last_passthrough_at: iso(pt.last_seen_ms),
        client_families: { legacy: group('ua:'), passthrough: group('ua:', pt) },
        refused: { brownout: h['refused:brownout'] ?? 0, sunset: h['refused:sunset'] ?? 0 },
      },
    };
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
        const fields = Object.keys(await this.store.hgetall(KEY + keyHash));
        const stale = fields.filter((f) => f.startsWith('day:') && f.slice(4) < oldest);
        if (stale.length) await this.store.hdel(KEY + keyHash, stale);
      })().catch((err: unknown) => this.logger.warn({ err }, 'deprecation day prune failed')),
    );
  }

  /** Store writes never fail the request or tick that caused them (their failures are logged); flush() awaits them. */
  private track(p: Promise<void>): void {
    const done = p.finally(() => this.pending.delete(done));
    this.pending.add(done);
  }
}

const STATUS_RANK = new Map(MIGRATION_STATUSES.map((s, i) => [s, i]));

/** Sorts report rows in place; ties always fall back to the key hash so the order is stable. */
function sortKeys(keys: KeyUsage[], sort: ReportSort, order: 'asc' | 'desc' | undefined): void {
  const cmp: Record<ReportSort, (a: KeyUsage, b: KeyUsage) => number> = {
    last_seen: (a, b) => (a.last_seen_at ?? '').localeCompare(b.last_seen_at ?? ''),
    requests: (a, b) => a.requests_total - b.requests_total,
    status: (a, b) => STATUS_RANK.get(a.migration.status)! - STATUS_RANK.get(b.migration.status)!,
    key_hash: () => 0,
  };
  // Recency and volume read best biggest first; status and hash in their natural order.
  const sign = (order ?? (sort === 'last_seen' || sort === 'requests' ? 'desc' : 'asc')) === 'desc' ? -1 : 1;
  keys.sort((a, b) => sign * cmp[sort](a, b) || a.key_hash.localeCompare(b.key_hash));
}

function countByStatus(statuses: readonly MigrationStatus[]): Record<MigrationStatus, number> {
  const counts = Object.fromEntries(MIGRATION_STATUSES.map((s) => [s, 0])) as Record<MigrationStatus, number>;
  for (const s of statuses) counts[s]++;
  return counts;
}

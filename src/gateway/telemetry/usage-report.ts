/**
 * The deprecation usage report: who still uses /v0.2, with what, read from the fleet's counters
 * (./usage-recorder.ts writes them; layout in ./usage-keys.ts), and the keys' migration statuses.
 */
import type { Clock } from '../../lib/timers';
import type { RefusalReason } from '../legacy';
import type { Counters } from '../store/store';
import { HISTORY_DAYS, MIGRATION_STATUSES, migrationStatus } from './migration';
import type { MigrationStatus } from './migration';
import { DAY_MS, PER_DAY, PER_KEY, PER_KEY_ACCOUNTS, PER_KEY_PASSTHROUGH, utcDay } from './usage-keys';

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

/** The report, and the key and status counts of the operator metrics, from the counters every replica wrote. */
export class UsageReport {
  /**
   * @param flushPending writes this replica's buffered counters, so a report is never behind the
   *   replica that builds it.
   */
  constructor(
    private readonly store: Counters,
    private readonly clock: Clock,
    private readonly flushPending: () => Promise<void>,
  ) {}

  async keyCount(): Promise<number> {
    return (await this.store.keys(PER_KEY)).length;
  }

  /** Keys per migration status, as the report's `totals.by_status` counts them, from two hashes per key (not the whole report). */
  async statusCounts(): Promise<Record<MigrationStatus, number>> {
    const keyHashes = (await this.store.keys(PER_KEY)).map((k) => k.slice(PER_KEY.length));
    const now = this.clock.now();
    const statuses = await Promise.all(
      keyHashes.map(async (h) => {
        const [legacy, pt] = await Promise.all([this.store.hgetall(PER_KEY + h), this.store.hgetall(PER_KEY_PASSTHROUGH + h)]);
        return migrationStatus(legacy.last_seen_ms, pt.last_seen_ms, now);
      }),
    );
    return countByStatus(statuses);
  }

  /** The fleet's report from the shared counters; this replica's buffered ones are written first, so it is never behind itself. */
  async report(deprecation: DeprecationReport['deprecation'], opts: ReportOptions = {}): Promise<DeprecationReport> {
    await this.flushPending();
    const keyHashes = (await this.store.keys(PER_KEY)).map((k) => k.slice(PER_KEY.length));
    const all = await Promise.all(keyHashes.map((h) => this.keyUsage(h)));
    const byStatus = countByStatus(all.map((k) => k.migration.status));
    const keys = opts.status ? all.filter((k) => opts.status!.includes(k.migration.status)) : all;
    sortKeys(keys, opts.sort ?? 'last_seen', opts.order);
    const dayKeys = (await this.store.keys(PER_DAY))
      .sort()
      .reverse()
      .slice(0, opts.days ?? 31);
    const daily = await Promise.all(dayKeys.map((k) => this.dayUsage(k.slice(PER_DAY.length))));
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
    const h = await this.store.hgetall(PER_DAY + date);
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
      this.store.hgetall(PER_KEY + keyHash),
      this.store.hgetall(PER_KEY_ACCOUNTS + keyHash),
      this.store.hgetall(PER_KEY_PASSTHROUGH + keyHash),
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

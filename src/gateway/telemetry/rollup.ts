import { schedule } from 'node-cron';
import type { ScheduledTask } from 'node-cron';
import type { Logger } from '../../lib/logger';
import type { Store } from '../store/store';
import type { DayUsage, DeprecationReport, DeprecationUsage } from './usage';
import { utcDay } from './usage';

const DAY_MS = 86_400_000;
/** How long a day's claim holds: past the day and any replica's late cron run, short of forever. */
const CLAIM_TTL_MS = 36 * 3_600_000;

export interface RollupSummary {
  /** The UTC day summarised (the day before the run). */
  day: DayUsage;
  totals: DeprecationReport['totals'];
  days_to_sunset: number;
  /** The keys with the most requests, for the operator's first mails. */
  top_keys: { key_hash: string; account_ids: string[]; requests_total: number; last_seen_at: string | null }[];
}

export interface RollupOptions {
  usage: DeprecationUsage;
  /** Where the fleet claims each day's run (every replica's cron fires; one summarises). */
  store: Pick<Store, 'claimOnce'>;
  logger: Logger;
  deprecation: DeprecationReport['deprecation'];
  cron: string;
  timezone: string;
  now?: () => number;
}

/**
 * The daily roll-up: a node-cron job that summarises the previous UTC day and the all-time counters
 * of /v0.2 usage and logs it as one structured line (also run once at shutdown, for the day so far).
 * Once per fleet: each run first claims its day in the store (`claimOnce`), so of the replicas whose
 * cron fires only the first logs; the shutdown run claims apart, so it never takes the day's own.
 */
export class DeprecationRollup {
  private task: ScheduledTask | undefined;
  private readonly now: () => number;

  constructor(private readonly opts: RollupOptions) {
    this.now = opts.now ?? Date.now;
  }

  start(): void {
    if (this.task) return;
    this.task = schedule(this.opts.cron, () => this.run().then(() => undefined), {
      name: 'deprecation-rollup',
      timezone: this.opts.timezone,
      noOverlap: true,
      unref: true,
    });
  }

  /**
   * Summarises `day` (default: yesterday, UTC) and logs it, unless another run (another replica)
   * claimed it first; `partial`: the shutdown's summary of the day so far. Never throws.
   */
  async run(day = utcDay(this.now() - DAY_MS), opts: { partial?: boolean } = {}): Promise<RollupSummary | undefined> {
    const { usage, logger, deprecation, store } = this.opts;
    try {
      if (!(await store.claimOnce(`rollup:${day}${opts.partial ? ':partial' : ''}`, CLAIM_TTL_MS))) {
        logger.debug({ day, partial: opts.partial === true }, 'deprecation roll-up already taken by another replica');
        return undefined;
      }
      await usage.flush();
      const report = await usage.report(deprecation, { days: 0 });
      const summary: RollupSummary = {
        day: await usage.dayUsage(day),
        totals: report.totals,
        days_to_sunset: Math.max(0, Math.ceil((Date.parse(deprecation.sunset) - this.now()) / DAY_MS)),
        top_keys: [...report.keys]
          .sort((a, b) => b.requests_total - a.requests_total)
          .slice(0, 10)
          .map((k) => ({ key_hash: k.key_hash, account_ids: k.account_ids, requests_total: k.requests_total, last_seen_at: k.last_seen_at })),
      };
      logger.info(
        { rollup: summary },
        `/v0.2 usage on ${day}: ${summary.day.active_keys} keys, ${summary.day.requests} requests, ${summary.day.streams} streams; ` +
          `${summary.totals.keys} keys in total (${summary.totals.by_status['legacy-only']} legacy-only, ${summary.totals.by_status.migrating} migrating), ` +
          `${summary.days_to_sunset} days to sunset`,
      );
      return summary;
    } catch (err) {
      logger.warn({ err }, 'deprecation roll-up failed');
      return undefined;
    }
  }

  async stop(): Promise<void> {
    const task = this.task;
    this.task = undefined;
    await task?.destroy();
  }
}

import { schedule } from 'node-cron';
import type { ScheduledTask } from 'node-cron';
import type { Logger } from '../../lib/logger';
import { realClock } from '../../lib/timers';
import { setLongTimeout } from '../../lib/timers';
import type { Clock, LongTimer } from '../../lib/timers';
import type { Claims } from '../store/store';
import type { DayUsage, DeprecationReport, DeprecationUsage } from './usage';
import { utcDay } from './usage';

const DAY_MS = 86_400_000;
/** How long a day's claim holds: past the day and any replica's late cron run, short of forever. */
const CLAIM_TTL_MS = 36 * 3_600_000;
/** A daily run that could not reach the store is tried again this often, this many times (an hour). */
const RETRY_MS = 60_000;
const RETRIES = 60;

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
  store: Claims;
  logger: Logger;
  deprecation: DeprecationReport['deprecation'];
  cron: string;
  timezone: string;
  /** What "now" is for the day summarised and the retry timer (default the real clock). */
  clock?: Clock;
}

/**
 * The daily roll-up: a node-cron job that summarises the previous UTC day and the all-time counters
 * of /v0.2 usage and logs it as one structured line (also run once at shutdown, for the day so far).
 * Once per fleet: each run first claims its day in the store (`claimOnce`), so of the replicas whose
 * cron fires only the first logs; the shutdown run claims apart, so it never takes the day's own.
 */
export class DeprecationRollup {
  private task: ScheduledTask | undefined;
  private retry: LongTimer | undefined;
  private stopped = false;
  private readonly clock: Clock;

  constructor(private readonly opts: RollupOptions) {
    this.clock = opts.clock ?? realClock;
  }

  start(): void {
    if (this.task) return;
    // node-cron keeps its own timers on real time (it takes no clock): when it fires, the day to
    // summarise is still decided by the clock (`runDaily`), and tests call `runDaily` themselves.
    this.task = schedule(this.opts.cron, () => this.runDaily(), {
      name: 'deprecation-rollup',
      timezone: this.opts.timezone,
      noOverlap: true,
      unref: true,
    });
  }

  /**
   * What the cron job runs: yesterday's summary; if the store could not be reached to claim it, tried
   * again every RETRY_MS (RETRIES times) for that same day, so a store outage at the cron's minute
   * does not lose the day. Resolves after the first attempt.
   */
  async runDaily(day = utcDay(this.clock.now() - DAY_MS), attempt = 0): Promise<void> {
    if ((await this.attempt(day, false)) !== 'unclaimed' || attempt >= RETRIES || this.stopped) return;
    this.retry?.clear();
    this.retry = setLongTimeout(() => void this.runDaily(day, attempt + 1), RETRY_MS, { clock: this.clock });
  }

  /**
   * Summarises `day` (default: yesterday, UTC) and logs it, unless another run (another replica)
   * claimed it first; `partial`: the shutdown's summary of the day so far. Never throws.
   */
  async run(day = utcDay(this.clock.now() - DAY_MS), opts: { partial?: boolean } = {}): Promise<RollupSummary | undefined> {
    const out = await this.attempt(day, opts.partial === true);
    return typeof out === 'string' ? undefined : out;
  }

  /** The summary; `taken` when another run claimed the day; `unclaimed` when the claim failed; `failed` after it. */
  private async attempt(day: string, partial: boolean): Promise<RollupSummary | 'taken' | 'unclaimed' | 'failed'> {
    const { usage, logger, deprecation, store } = this.opts;
    try {
      if (!(await store.claimOnce(`rollup:${day}${partial ? ':partial' : ''}`, CLAIM_TTL_MS))) {
        logger.debug({ day, partial }, 'deprecation roll-up already taken by another replica');
        return 'taken';
      }
    } catch (err) {
      logger.warn({ err, day }, 'deprecation roll-up: the store could not be reached to claim the day');
      return 'unclaimed';
    }
    try {
      await usage.flush();
      const report = await usage.report(deprecation, { days: 0 });
      const summary: RollupSummary = {
        day: await usage.dayUsage(day),
        totals: report.totals,
        days_to_sunset: Math.max(0, Math.ceil((Date.parse(deprecation.sunset) - this.clock.now()) / DAY_MS)),
        top_keys: [...report.keys]
          .sort((a, b) => b.requests_total - a.requests_total)
          .slice(0, 10)
          .map((k) => ({
            key_hash: k.key_hash,
            account_ids: k.account_ids,
            requests_total: k.requests_total,
            last_seen_at: k.last_seen_at,
          })),
      };
      logger.info(
        { rollup: summary },
        `/v0.2 usage on ${day}: ${summary.day.active_keys} keys, ${summary.day.requests} requests, ${summary.day.streams} streams; ` +
          `${summary.totals.keys} keys in total (${summary.totals.by_status['legacy-only']} legacy-only, ${summary.totals.by_status.migrating} migrating), ` +
          `${summary.days_to_sunset} days to sunset`,
      );
      return summary;
    } catch (err) {
      // The day is claimed: no other replica will log it (docs/operations.md).
      logger.warn({ err, day }, 'deprecation roll-up failed');
      return 'failed';
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.retry?.clear();
    this.retry = undefined;
    const task = this.task;
    this.task = undefined;
    await task?.destroy();
  }
}

/**
 * What /v0.2 does as the sunset approaches and after it (docs/operations.md "Sunset runbook"):
 * brownout windows refuse new legacy creates (and, if configured, new results sockets) with 503;
 * from `deprecation.sunset` on, `afterSunset` picks serve, refuse (410) or the brownout schedule.
 * Running streams are never touched: only the admission of new work is decided here.
 *
 * Why 503 for a brownout: legacy clients class any >=500 as a server-side, temporary failure and show
 * the body's `message`; the create retries (1 s, 2 s, 4 s) end inside any window of a minute or more,
 * so the customer sees the message that names the sunset date and the guide. 429 would read as the
 * 5-stream limit and 401 as a bad key, both sending the customer to the wrong fix.
 */
import { createTask } from 'node-cron';
import type { ScheduledTask } from 'node-cron';
import type { DeprecationConfig } from '../../../config';
import { ServiceError } from '../../../lib/errors';
import { realClock } from '../../../lib/timers';
import type { Clock } from '../../../lib/timers';
import { legacyError } from '../contract/validate';

const MINUTE_MS = 60_000;

/** Why a legacy call was refused before it reached the adapter. */
export type RefusalReason = 'brownout' | 'sunset';

export interface Refusal {
  reason: RefusalReason;
  error: ServiceError;
  /** Short enough for a WebSocket close reason (123 bytes). */
  closeReason: string;
}

interface Recurring {
  /** Never started: used only for `match`. */
  task: ScheduledTask;
  durationMs: number;
  /** Last minute examined, and the latest matching minute up to it (within one duration). */
  scannedTo: number;
  lastMatch: number | undefined;
}

/** Fraction in [0, 1) of a key hash (16 hex digits): the same key is always in or out of a share. */
export function keyShare(keyHash: string): number {
  return Number.parseInt(keyHash.slice(0, 8), 16) / 2 ** 32;
}

export class SunsetPolicy {
  private readonly recurring: Recurring[];
  private readonly windows: { start: number; end: number }[];
  private readonly only: Set<string>;
  private readonly exempt: Set<string>;
  private readonly sunsetMs: number;

  /**
   * @param clock what "now" is for every decision. The cron expressions are only matched against
   *   minutes of that time (their tasks are never started), so they follow the injected clock too.
   */
  constructor(
    private readonly cfg: DeprecationConfig,
    private readonly clock: Pick<Clock, 'now'> = realClock,
  ) {
    const b = cfg.brownouts;
    this.recurring = b.schedule.map((s) => ({
      task: createTask(s.cron, () => undefined, { timezone: s.timezone, name: 'brownout-window' }),
      durationMs: s.durationMinutes * MINUTE_MS,
      scannedTo: Number.NaN,
      lastMatch: undefined,
    }));
    this.windows = b.windows.map((w) => ({ start: Date.parse(w.start), end: Date.parse(w.end) }));
    this.only = new Set(b.onlyKeys);
    this.exempt = new Set(b.exemptKeys);
    this.sunsetMs = Date.parse(cfg.sunset);
    // The first look scans a whole duration back (up to 240 matches per schedule): pay it at boot, not on a request.
    this.recurringEnd(clock.now());
  }

  /** The refusal of a new legacy stream, or undefined to admit it. */
  admitCreate(keyHash: string): Refusal | undefined {
    const t = this.clock.now();
    if (t >= this.sunsetMs && this.cfg.afterSunset === 'refuse') {
      return {
        reason: 'sunset',
        error: legacyError(
          410,
          'interface_retired',
          `The /v0.2 interface was turned off on ${this.cfg.sunset}; new streams are refused. Migrate to /v1beta: ${this.cfg.link}`,
          { sunset: this.cfg.sunset, migration_guide: this.cfg.link },
        ),
        closeReason: 'interface retired',
      };
    }
    return this.brownout(keyHash, t);
  }

  /** The refusal of a new results socket (only when `brownouts.sockets` is set), or undefined. */
  admitSocket(keyHash: string): Refusal | undefined {
    return this.cfg.brownouts.sockets ? this.brownout(keyHash, this.clock.now()) : undefined;
  }

  /** When the brownout window open at `t` closes, or undefined when none is open. */
  windowEnd(t: number): number | undefined {
    let end: number | undefined;
    for (const w of this.windows) if (t >= w.start && t < w.end) end = Math.max(end ?? 0, w.end);
    const rec = this.recurringEnd(t);
    return rec === undefined ? end : Math.max(end ?? 0, rec);
  }

  /** Releases the cron matchers. */
  async close(): Promise<void> {
    await Promise.all(this.recurring.map((r) => r.task.destroy()));
  }

  private brownout(keyHash: string, t: number): Refusal | undefined {
    if (t >= this.sunsetMs && this.cfg.afterSunset === 'serve') return undefined;
    if (!this.selected(keyHash)) return undefined;
    const end = this.windowEnd(t);
    if (end === undefined) return undefined;
    const until = new Date(end).toISOString();
    const error = new ServiceError(
      503,
      'brownout',
      `Scheduled /v0.2 brownout until ${until}: the /v0.2 interface will be turned off on ${this.cfg.sunset}. ` +
        `Migrate to /v1beta: ${this.cfg.link}`,
      {
        shape: 'legacy',
        details: { brownout_ends_at: until, sunset: this.cfg.sunset, migration_guide: this.cfg.link },
        headers: { 'retry-after': String(Math.max(1, Math.ceil((end - t) / 1000))) },
      },
    );
    return { reason: 'brownout', error, closeReason: `brownout until ${until}` };
  }

  private selected(keyHash: string): boolean {
    if (this.exempt.has(keyHash)) return false;
    if (this.only.size > 0 && !this.only.has(keyHash)) return false;
    const share = this.cfg.brownouts.share;
    return share >= 1 || keyShare(keyHash) < share;
  }

  /**
   * A recurring window is open at `t` when its cron matched a minute in (t - duration, t]. Scanned
   * incrementally: each call examines only the minutes since the previous one (a cron match costs
   * tens of microseconds); a clock that jumps back or far ahead rescans one duration.
   */
  private recurringEnd(t: number): number | undefined {
    const minute = Math.floor(t / MINUTE_MS) * MINUTE_MS;
    let endsAt: number | undefined;
    for (const r of this.recurring) {
      let from = r.scannedTo + MINUTE_MS;
      if (!(r.scannedTo <= minute && minute - r.scannedTo < r.durationMs)) {
        from = minute - r.durationMs + MINUTE_MS;
        r.lastMatch = undefined;
      }
      for (let m = from; m <= minute; m += MINUTE_MS) if (r.task.match(new Date(m))) r.lastMatch = m;
      r.scannedTo = minute;
      if (r.lastMatch !== undefined && r.lastMatch + r.durationMs > t) endsAt = Math.max(endsAt ?? 0, r.lastMatch + r.durationMs);
    }
    return endsAt;
  }
}

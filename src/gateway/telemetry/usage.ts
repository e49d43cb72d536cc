/**
 * Who still uses /v0.2, with what: the recorder (./usage-recorder.ts) counting every replica's events
 * into the store, and the report (./usage-report.ts) read back from those counters. The gateway
 * keeps one DeprecationUsage, both in one.
 */
import type { Logger } from '../../lib/logger';
import { realClock } from '../../lib/timers';
import type { Clock } from '../../lib/timers';
import type { Counters } from '../store/store';
import { UsageRecorder } from './usage-recorder';
import { UsageReport } from './usage-report';

export type { StreamTraits } from './usage-recorder';
export type { DayUsage, DeprecationReport, KeyMigration, KeyUsage, ReportOptions, ReportSort } from './usage-report';
export { utcDay } from './usage-keys';

/** The recorder, plus the report of what every replica recorded (this one's buffer flushed first). */
export class DeprecationUsage extends UsageRecorder {
  private readonly reports: UsageReport;

  /** `clock` and `flushMs`: see UsageRecorder. */
  constructor(store: Counters, logger: Logger, clock: Clock = realClock, flushMs?: number) {
    super(store, logger, clock, flushMs);
    this.reports = new UsageReport(store, clock, () => this.flush());
  }

  keyCount: UsageReport['keyCount'] = () => this.reports.keyCount();
  statusCounts: UsageReport['statusCounts'] = () => this.reports.statusCounts();
  report: UsageReport['report'] = (...a) => this.reports.report(...a);
  dayUsage: UsageReport['dayUsage'] = (...a) => this.reports.dayUsage(...a);
}

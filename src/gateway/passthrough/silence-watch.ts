import { performance } from 'node:perf_hooks';
import type { Flight } from './flight';

/**
 * The upstream silence timeout for every request in flight, from one timer: every `timeoutMs / 4`
 * (at most 1 s) it destroys the upstream requests with no bytes either way for `timeoutMs`, so a
 * silent upstream is cut between `timeoutMs` and `timeoutMs` + one period. The timer is unref'd;
 * it stops at the first sweep that finds nothing in flight.
 */
export class SilenceWatch {
  private readonly flights = new Set<Flight>();
  private timer: NodeJS.Timeout | undefined;
  private readonly periodMs: number;

  constructor(
    private readonly timeoutMs: number,
    private readonly onSilent: (f: Flight) => void,
  ) {
    this.periodMs = Math.min(1000, Math.max(10, Math.floor(timeoutMs / 4)));
  }

  add(f: Flight): void {
    this.flights.add(f);
    this.timer ??= setInterval(() => this.sweep(), this.periodMs).unref();
  }

  delete(f: Flight): void {
    this.flights.delete(f);
  }

  private sweep(): void {
    if (this.flights.size === 0) {
      clearInterval(this.timer);
      this.timer = undefined;
      return;
    }
    const silentSince = performance.now() - this.timeoutMs;
    for (const f of this.flights) {
      if (f.lastActivity <= silentSince) {
        this.flights.delete(f);
        this.onSilent(f);
      }
    }
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
    this.flights.clear();
  }
}

/**
 * Whether this replica can reach the upstream while it is part of a fleet (a gray failure: its
 * network path to the upstream broke, the others' did not). Impaired after `failuresInARow` ticks in
 * a row that got no answer (no connection, a timeout, a 5xx, an open circuit); recovered only once
 * the upstream probe has answered and no tick has failed for `recoverAfterMs` (hysteresis: a flaky
 * path does not send streams back and forth). The fleet then hands this replica's streams to
 * replicas that are not impaired, and makes it nobody's target while it stays impaired.
 */
import type { Clock } from '../../lib/timers';

export interface UpstreamReachOptions {
  /** Ticks in a row without an answer that make this replica impaired. */
  failuresInARow: number;
  /** How long the probe must say "up" with no failed tick before the replica counts as recovered. */
  recoverAfterMs: number;
  clock: Pick<Clock, 'now'>;
}

export class UpstreamReach {
  private failedInARow = 0;
  private lastFailureAtMs = 0;
  private impairedNow = false;

  constructor(private readonly opts: UpstreamReachOptions) {}

  /** A tick's outcome (the streams' `upstreamReach` observer event). */
  upstreamReach(reached: boolean): void {
    if (reached) {
      this.failedInARow = 0;
      return;
    }
    this.failedInARow++;
    this.lastFailureAtMs = this.opts.clock.now();
    if (this.failedInARow >= this.opts.failuresInARow) this.impairedNow = true;
  }

  /** Impaired now; `probeUp` is the upstream probe's last answer (undefined: not probed yet). */
  impaired(probeUp: boolean | undefined): boolean {
    if (this.impairedNow && probeUp === true && this.opts.clock.now() - this.lastFailureAtMs >= this.opts.recoverAfterMs) {
      this.impairedNow = false;
      this.failedInARow = 0;
    }
    return this.impairedNow;
  }
}

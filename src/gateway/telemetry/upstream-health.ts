import { setLongInterval } from '../../lib/timers';
import type { Clock, LongTimer } from '../../lib/timers';

/**
 * Periodic upstream probe behind the `gateway_upstream_up` gauge. Upstream health is a metric, not
 * readiness: an upstream blip must not take every replica out of the load balancer at once.
 */
export class UpstreamHealth {
  private last: boolean | undefined;
  private timer: LongTimer | undefined;
  private running: Promise<boolean> | undefined;

  constructor(
    private readonly probe: () => Promise<unknown>,
    private readonly opts: {
      intervalMs: number;
      /** Time of the probe's timer (default the real clock). */ clock?: Clock;
      /** The probe's answer changed: up, or down with the probe's error. */
      onChange?: (up: boolean, err?: unknown) => void;
    },
  ) {}

  /** Last result (undefined before the first probe). */
  get up(): boolean | undefined {
    return this.last;
  }

  /** One probe now (a probe already running is shared, never doubled). */
  check(): Promise<boolean> {
    this.running ??= this.probe()
      .then(
        () => ({ ok: true, err: undefined }),
        (err: unknown) => ({ ok: false, err }),
      )
      .then(({ ok, err }) => {
        if (ok !== this.last) this.opts.onChange?.(ok, err);
        this.last = ok;
        this.running = undefined;
        return ok;
      });
    return this.running;
  }

  start(): void {
    if (this.timer) return;
    void this.check();
    // Unref'd: the probe never keeps the process alive.
    this.timer = setLongInterval(() => void this.check(), this.opts.intervalMs, { clock: this.opts.clock });
  }

  stop(): void {
    this.timer?.clear();
    this.timer = undefined;
  }
}

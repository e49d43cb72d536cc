/** The timer functions the prober uses (injectable: tests drive probes with fake timers). */
export interface ProbeTimers {
  setInterval(fn: () => void, ms: number): unknown;
  clearInterval(handle: unknown): void;
}

const REAL_TIMERS: ProbeTimers = {
  setInterval: (fn, ms) => setInterval(fn, ms).unref(),
  clearInterval: (h) => clearInterval(h as NodeJS.Timeout),
};

/**
 * Periodic upstream probe behind the `gateway_upstream_up` gauge. Upstream health is a metric, not
 * readiness: an upstream blip must not take every replica out of the load balancer at once.
 */
export class UpstreamHealth {
  private last: boolean | undefined;
  private handle: unknown;
  private running: Promise<boolean> | undefined;

  constructor(
    private readonly probe: () => Promise<unknown>,
    private readonly opts: { intervalMs: number; timers?: ProbeTimers; onChange?: (up: boolean) => void },
  ) {}

  /** Last result (undefined before the first probe). */
  get up(): boolean | undefined {
    return this.last;
  }

  /** One probe now (a probe already running is shared, never doubled). */
  check(): Promise<boolean> {
    this.running ??= this.probe()
      .then(
        () => true,
        () => false,
      )
      .then((ok) => {
        if (ok !== this.last) this.opts.onChange?.(ok);
        this.last = ok;
        this.running = undefined;
        return ok;
      });
    return this.running;
  }

  start(): void {
    if (this.handle !== undefined) return;
    void this.check();
    this.handle = (this.opts.timers ?? REAL_TIMERS).setInterval(() => void this.check(), this.opts.intervalMs);
  }

  stop(): void {
    if (this.handle === undefined) return;
    (this.opts.timers ?? REAL_TIMERS).clearInterval(this.handle);
    this.handle = undefined;
  }
}

/**
 * A small circuit breaker for one upstream: after `threshold` consecutive failures that say the
 * upstream itself is down (no answer, timeout, 5xx other than a model's own 503), calls fail at
 * once for `openMs`; then one probe goes through (half-open) and its outcome closes or reopens it.
 * Without it an outage multiplies upstream attempts by streams × ticks × retries × fallbacks.
 */
import { realClock } from '../lib/timers';
import type { Clock } from '../lib/timers';
import { UpstreamError } from './errors';

export interface BreakerOptions {
  /** Consecutive upstream failures that open the circuit. 0 disables the breaker. */
  threshold: number;
  /** How long it stays open before one probe is let through. */
  openMs: number;
  /** Time of the open period (default the real clock). */
  clock?: Pick<Clock, 'now'>;
  /** Called on every state change (logs, metrics). */
  onChange?(state: BreakerState): void;
}

export type BreakerState = 'closed' | 'open' | 'half-open';

export class CircuitBreaker {
  private failures = 0;
  private openedAtMs = 0;
  private current: BreakerState = 'closed';
  private probing = false;
  private readonly clock: Pick<Clock, 'now'>;

  constructor(private readonly opts: BreakerOptions) {
    this.clock = opts.clock ?? realClock;
  }

  get state(): BreakerState {
    if (this.current === 'open' && this.clock.now() - this.openedAtMs >= this.opts.openMs) this.set('half-open');
    return this.current;
  }

  /** Throws `upstream_circuit_open` when no call may go out now; lets one probe through when half-open. */
  admit(): void {
    if (this.opts.threshold <= 0) return;
    const state = this.state;
    if (state === 'closed') return;
    if (state === 'half-open' && !this.probing) {
      this.probing = true;
      return;
    }
    throw circuitOpenError(Math.max(0, this.openedAtMs + this.opts.openMs - this.clock.now()));
  }

  /** Records the outcome of an admitted call: `err` undefined for an answer. */
  record(err?: unknown): void {
    if (this.opts.threshold <= 0) return;
    const wasProbe = this.probing;
    this.probing = false;
    // Our own abort (or a bug) says nothing about the upstream.
    if (err !== undefined && !(err instanceof UpstreamError)) return;
    if (!isUpstreamDown(err)) {
      this.failures = 0;
      if (this.current !== 'closed') this.set('closed');
      return;
    }
    this.failures++;
    if (wasProbe || this.failures >= this.opts.threshold) {
      this.openedAtMs = this.clock.now();
      this.set('open');
    }
  }

  private set(state: BreakerState): void {
    if (state === this.current) return;
    this.current = state;
    this.opts.onChange?.(state);
  }
}

/**
 * Failures that speak about the upstream as a whole. An answer (any 4xx, a model's own 503
 * `model_unavailable`) proves it is up; an abort by our own caller says nothing
 * (see `record`).
 */
export function isUpstreamDown(err: unknown): boolean {
  if (!(err instanceof UpstreamError) || err.code === 'upstream_circuit_open') return false;
  if (err.kind !== 'http') return true;
  return err.status >= 500 && err.upstreamCode !== 'model_unavailable';
}

export function circuitOpenError(retryAfterMs: number): UpstreamError {
  return new UpstreamError({
    kind: 'network',
    status: 503,
    code: 'upstream_circuit_open',
    message: 'Upstream circuit open after repeated failures; not calling it for now',
    retryAfterMs,
  });
}

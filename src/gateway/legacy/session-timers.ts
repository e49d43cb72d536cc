/**
 * The timers of a stream this replica schedules: the lease check (the store's lease is the truth),
 * the upstream keepalive, the first-frame poll and the ticker on the stream's grid. What they find
 * (a lapsed lease, a gone upstream stream, a lost record) goes back to the lifecycle through
 * `TimerHost`; ./sessions.ts stops them all in `stopLocal`.
 */
import { realClock, setLongInterval, setLongTimeout } from '../../lib/timers';
import type { Clock } from '../../lib/timers';
import { UpstreamError, isUpstreamCode, isUpstreamStatus } from '../../upstream/client';
import type { SessionRecord } from '../store/store';
import { resumePoint } from './ownership';
import type { LiveSession, SessionDeps } from './session-ports';
import { Ticker } from './ticker';
import type { TickInfo } from './ticker';
import type { LegacyEndReasons } from './translate';

/** How soon a lease check that could not read the store asks again. */
const LEASE_RETRY_MS = 1000;

/** What the timers hand back to the lifecycle (LegacySessions). */
export interface TimerHost {
  readonly replicaId: string;
  readonly reasons: LegacyEndReasons;
  end(streamId: string, reason: string, opts?: { deleteUpstream?: boolean }): Promise<boolean>;
  /** Stops the stream here only (owned or ended elsewhere). */
  stopLocal(session: LiveSession): Promise<void>;
  /** Writes a record the store lost back from memory. */
  reRegister(session: LiveSession): Promise<void>;
  /** One inference tick (skipped while this replica is self-fenced). */
  tick(session: LiveSession, info: TickInfo): Promise<void>;
}

export class SessionTimers {
  private readonly clock: Clock;

  constructor(
    private readonly deps: SessionDeps,
    private readonly host: TimerHost,
  ) {
    this.clock = deps.clock ?? realClock;
  }

  private get leaseMs(): number {
    return this.deps.cfg.leaseTtlSeconds * 1000;
  }

  /** Arms a stream's lease check (at `leaseExpiresAtMs`) and its upstream keepalive (create, adoption). */
  arm(session: LiveSession, leaseExpiresAtMs: number): void {
    this.armLease(session, leaseExpiresAtMs);
    this.armUpstreamKeepalive(session);
  }

  armLease(session: LiveSession, expiresAtMs: number): void {
    session.leaseTimer?.clear();
    session.leaseTimer = setLongTimeout(() => void this.checkLease(session), expiresAtMs - this.clock.now(), { clock: this.clock });
  }

  /**
   * The store's lease is the truth (a keepalive may have landed on another replica). A store that
   * cannot be read is asked again later, and a lease that lapsed meanwhile is extended by one TTL
   * from the recovery: an outage of the store never ends a stream as lease_expired.
   */
  private async checkLease(session: LiveSession, storeFailed = false): Promise<void> {
    if (session.ending) return;
    let rec: SessionRecord | undefined;
    try {
      rec = await this.deps.store.getSession(session.streamId);
    } catch (err) {
      this.deps.logger.warn({ err, streamId: session.streamId }, 'lease check could not read the store; retrying');
      return this.retryLeaseCheck(session);
    }
    if (session.ending) return;
    const now = this.clock.now();
    if (!rec) {
      // The store lost the record: it is re-registered while this replica's own lease view holds.
      if (session.leaseExpiresAtMs > now) {
        await this.host.reRegister(session);
        return this.armLease(session, session.leaseExpiresAtMs);
      }
    } else if (rec.state !== 'active' || rec.owner !== this.host.replicaId) {
      return this.host.stopLocal(session);
    } else if (rec.leaseExpiresAtMs > now) {
      session.leaseExpiresAtMs = rec.leaseExpiresAtMs;
      return this.armLease(session, rec.leaseExpiresAtMs);
    } else {
      // Lapsed: during or after a store outage it gets a full lease from the recovery instead.
      const deadline = this.deps.storeHealth?.leaseDeadline(rec.leaseExpiresAtMs, this.leaseMs);
      if (deadline === null) return this.retryLeaseCheck(session);
      const extendTo = Math.max(deadline ?? 0, storeFailed ? now + this.leaseMs : 0);
      if (extendTo > now) {
        const renewed = await this.deps.store.updateSession(session.streamId, { leaseExpiresAtMs: extendTo });
        if (renewed) {
          session.leaseExpiresAtMs = renewed.leaseExpiresAtMs;
          return this.armLease(session, renewed.leaseExpiresAtMs);
        }
      }
    }
    await this.host.end(session.streamId, this.host.reasons.leaseExpired);
  }

  /** Asks again soon, remembering that the store failed (a lease that lapsed meanwhile is extended). */
  private retryLeaseCheck(session: LiveSession): void {
    session.leaseTimer?.clear();
    session.leaseTimer = setLongTimeout(() => void this.checkLease(session, true), LEASE_RETRY_MS, { clock: this.clock });
  }

  /** Keeps the upstream lease (300 s) alive on our own, well inside it. */
  private armUpstreamKeepalive(session: LiveSession): void {
    session.upstreamKeepalive = setLongInterval(() => {
      this.deps.upstream
        .keepalive(session.apiKey, session.streamId, { signal: session.abort.signal, ...session.ids })
        .then((ka) => {
          session.publishToken = ka.publish.token;
          this.deps.media?.renewToken?.(session.streamId, ka.publish.token);
        })
        .catch((err: unknown) => this.onUpstreamLoss(session, err));
    }, this.deps.cfg.upstreamKeepaliveSeconds * 1000, { clock: this.clock });
  }

  /** Upstream stream gone or unrenewable: end with the reason that matches why. */
  async onUpstreamLoss(session: LiveSession, err: unknown): Promise<void> {
    if (session.ending) return;
    const { reasons } = this.host;
    if (isUpstreamStatus(err, 402)) return void this.host.end(session.streamId, reasons.insufficientCredits);
    if (isUpstreamStatus(err, 404) || isUpstreamCode(err, 'stream_not_found')) {
      const reason = await this.upstreamEndReason(session);
      return void this.host.end(session.streamId, reason, { deleteUpstream: false });
    }
    this.deps.logger.warn({ err, streamId: session.streamId }, 'upstream keepalive failed');
  }

  private async upstreamEndReason(session: LiveSession): Promise<string> {
    const { reasons } = this.host;
    try {
      const s = await this.deps.upstream.getStream(session.apiKey, session.streamId);
      return s.end_reason === 'deleted' ? reasons.clientRequested : reasons.leaseExpired;
    } catch {
      return reasons.leaseExpired;
    }
  }

  /**
   * Polls (cheaply, backing off) until the upstream reports a first frame, then starts ticking; a
   * clip stream's first tick waits until the stream holds a full clip (frame mode starts at once).
   */
  waitForFirstFrame(session: LiveSession, delayMs: number = this.deps.cfg.firstFramePollMs): void {
    session.firstFramePoll = this.clock.setTimeout(() => {
      this.deps.upstream
        .getStream(session.apiKey, session.streamId, { signal: session.abort.signal, ...session.ids })
        .then((s) => {
          if (session.ending) return;
          if (s.state === 'ended') return void this.onUpstreamLoss(session, new UpstreamError({ status: 404, kind: 'http', upstreamCode: 'stream_not_found', message: 'stream ended upstream' }));
          if (s.last_frame_at_ms === null) return this.waitForFirstFrame(session, Math.min(delayMs * 1.5, 2000));
          const spec = session.spec;
          const short = spec.mode === 'clip' ? spec.clip.clipLengthMs - s.stream_time_ms : 0;
          this.startTicker(session, this.clock.now() + Math.max(0, short));
        })
        .catch((err: unknown) => {
          if (session.ending) return;
          if (isUpstreamStatus(err, 404)) return void this.onUpstreamLoss(session, err);
          this.waitForFirstFrame(session, Math.min(delayMs * 2, 5000));
        });
    }, delayMs);
    session.firstFramePoll.unref?.();
  }

  /** An adopted stream resumes ticking on its record's grid (the next tick due, none replayed). */
  resumeTicking(session: LiveSession, rec: SessionRecord): void {
    const at = resumePoint(rec, session.spec.intervalMs, this.clock.now());
    this.startTicker(session, at.gridStartMs, at.n);
  }

  /** Ticks from tick `firstN` on the grid starting at `gridStartMs` (a new stream: its first tick, recorded for a successor). */
  private startTicker(session: LiveSession, gridStartMs: number, firstN = 0): void {
    const { cfg, observer, logger } = this.deps;
    if (session.gridStartMs === null) {
      session.gridStartMs = gridStartMs;
      this.deps.store.updateSession(session.streamId, { gridStartMs }).catch((err: unknown) => logger.warn({ err, streamId: session.streamId }, 'could not record the tick grid'));
    }
    session.ticker = new Ticker({
      periodMs: session.spec.intervalMs,
      maxInFlight: cfg.maxInFlight,
      onTick: (tick) => this.host.tick(session, tick),
      clock: this.clock,
      onSkip: () => observer?.tickSkipped?.(session.streamId),
      onError: (err) => logger.error({ err, streamId: session.streamId }, 'inference tick failed'),
    });
    session.ticker.start(gridStartMs, firstN);
  }
}

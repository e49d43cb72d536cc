/**
 * The timers of a stream this replica schedules: the lease check (the store's lease is the truth),
 * the upstream keepalive, the first-frame poll and the ticker on the stream's grid. What they find
 * (a lapsed lease, a gone upstream stream, a lost record) goes to the end path or the record
 * upkeep (`TimerParts`); ./local-sessions.ts stops them all in `stop`.
 */
import { ATTR, inSpan } from '../../../lib/spans';
import { setLongInterval, setLongTimeout } from '../../../lib/timers';
import type { Clock } from '../../../lib/timers';
import { isUpstreamStatus } from '../../../upstream/client';
import type { SessionRecord } from '../../store/store';
import type { TickInference } from './inference';
import type { LocalSessions } from './registry';
import { resumePoint } from './ownership';
import type { RecordSync } from './record-sync';
import type { SessionEnd } from './end';
import type { LiveSession, SessionContext } from './ports';
import { Ticker } from './ticker';

/** How soon a lease check that could not read the store asks again. */
const LEASE_RETRY_MS = 1000;

/** What the timers act on: the end path, the registry, the record upkeep and the tick. */
export interface TimerParts {
  /** A lapsed lease ends its stream; an upstream loss ends it with the matching reason. */
  end: Pick<SessionEnd, 'end' | 'reasons' | 'onUpstreamLoss' | 'endedUpstream'>;
  /** Stops a stream here only (owned or ended elsewhere); `selfFenced` lets its ticks pass. */
  local: Pick<LocalSessions, 'remove' | 'selfFenced'>;
  /** Writes a record the store lost back from memory. */
  sync: Pick<RecordSync, 'reRegister'>;
  /** One inference tick. */
  inference: Pick<TickInference, 'run'>;
}

export class SessionTimers {
  constructor(
    private readonly deps: SessionContext,
    private readonly parts: TimerParts,
  ) {}

  private get clock(): Clock {
    return this.deps.clock;
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
    session.runtime.leaseTimer?.clear();
    session.runtime.leaseTimer = setLongTimeout(() => void this.checkLease(session), expiresAtMs - this.clock.now(), { clock: this.clock });
  }

  /**
   * The store's lease is the truth (a keepalive may have landed on another replica). A store that
   * cannot be read is asked again later, and a lease that lapsed meanwhile is extended by one TTL
   * from the recovery: an outage of the store never ends a stream as lease_expired.
   */
  private async checkLease(session: LiveSession, storeFailed = false): Promise<void> {
    if (session.runtime.ending) return;
    let rec: SessionRecord | undefined;
    try {
      rec = await this.deps.store.getSession(session.record.streamId);
    } catch (err) {
      this.deps.logger.warn({ err, streamId: session.record.streamId }, 'lease check could not read the store; retrying');
      return this.retryLeaseCheck(session);
    }
    if (session.runtime.ending) return;
    const now = this.clock.now();
    if (!rec) {
      // The store lost the record: it is re-registered while this replica's own lease view holds.
      if (session.record.leaseExpiresAtMs > now) {
        await this.parts.sync.reRegister(session);
        return this.armLease(session, session.record.leaseExpiresAtMs);
      }
    } else if (rec.state !== 'active' || rec.owner !== this.deps.replicaId) {
      // Ended or owned elsewhere: it leaves this replica's bookkeeping (nothing upstream is ours to do).
      return this.parts.local.remove(session.record.streamId);
    } else if (rec.leaseExpiresAtMs > now) {
      session.record.leaseExpiresAtMs = rec.leaseExpiresAtMs;
      return this.armLease(session, rec.leaseExpiresAtMs);
    } else {
      // Lapsed: during or after a store outage it gets a full lease from the recovery instead.
      const deadline = this.deps.storeHealth?.leaseDeadline(rec.leaseExpiresAtMs, this.leaseMs);
      if (deadline === null) return this.retryLeaseCheck(session);
      const extendTo = Math.max(deadline ?? 0, storeFailed ? now + this.leaseMs : 0);
      if (extendTo > now) {
        const renewed = await this.deps.store.updateSession(session.record.streamId, { leaseExpiresAtMs: extendTo });
        if (renewed) {
          session.record.leaseExpiresAtMs = renewed.leaseExpiresAtMs;
          return this.armLease(session, renewed.leaseExpiresAtMs);
        }
      }
    }
    // A lease left unrenewed by a keepalive refused for credits ends for that reason.
    const { reasons } = this.parts.end;
    await this.parts.end.end(session.record.streamId, rec?.creditsRefusedAtMs != null ? reasons.insufficientCredits : reasons.leaseExpired);
  }

  /** Asks again soon, remembering that the store failed (a lease that lapsed meanwhile is extended). */
  private retryLeaseCheck(session: LiveSession): void {
    session.runtime.leaseTimer?.clear();
    session.runtime.leaseTimer = setLongTimeout(() => void this.checkLease(session, true), LEASE_RETRY_MS, { clock: this.clock });
  }

  /** Keeps the upstream lease (300 s) alive on our own, well inside it (traced as `legacy.upstream_keepalive`). */
  private armUpstreamKeepalive(session: LiveSession): void {
    session.runtime.upstreamKeepalive = setLongInterval(() => {
      const { record } = session;
      void inSpan('legacy.upstream_keepalive', { parent: 'root', link: record.ids, attributes: { [ATTR.streamId]: record.streamId } }, () =>
        this.deps.upstream.keepalive(session.apiKey, record.streamId, { signal: session.runtime.abort.signal, ...record.ids }),
      )
        .then((ka) => {
          session.runtime.publishToken = ka.publish.token;
          this.deps.media?.renewToken?.(record.streamId, ka.publish.token);
        })
        .catch((err: unknown) => this.parts.end.onUpstreamLoss(session, err));
    }, this.deps.cfg.upstreamKeepaliveSeconds * 1000, { clock: this.clock });
  }

  /**
   * Polls (cheaply, backing off) until the upstream reports a first frame, then starts ticking; a
   * clip stream's first tick waits until the stream holds a full clip (frame mode starts at once).
   */
  waitForFirstFrame(session: LiveSession, delayMs: number = this.deps.cfg.firstFramePollMs): void {
    session.runtime.firstFramePoll = this.clock.setTimeout(() => {
      this.deps.upstream
        .getStream(session.apiKey, session.record.streamId, { signal: session.runtime.abort.signal, ...session.record.ids })
        .then((s) => {
          if (session.runtime.ending) return;
          if (s.state === 'ended') return void this.parts.end.endedUpstream(session, s);
          if (s.last_frame_at_ms === null) return this.waitForFirstFrame(session, Math.min(delayMs * 1.5, 2000));
          const spec = session.record.spec;
          const short = spec.mode === 'clip' ? spec.clip.clipLengthMs - s.stream_time_ms : 0;
          this.startTicker(session, this.clock.now() + Math.max(0, short));
        })
        .catch((err: unknown) => {
          if (session.runtime.ending) return;
          if (isUpstreamStatus(err, 404)) return void this.parts.end.onUpstreamLoss(session, err);
          this.waitForFirstFrame(session, Math.min(delayMs * 2, 5000));
        });
    }, delayMs);
    session.runtime.firstFramePoll.unref?.();
  }

  /** An adopted stream resumes ticking on its record's grid (the next tick due, none replayed). */
  resumeTicking(session: LiveSession, rec: SessionRecord): void {
    const at = resumePoint(rec, session.record.spec.intervalMs, this.clock.now());
    this.startTicker(session, at.gridStartMs, at.n);
  }

  /** Ticks from tick `firstN` on the grid starting at `gridStartMs` (a new stream: its first tick, recorded for a successor). */
  private startTicker(session: LiveSession, gridStartMs: number, firstN = 0): void {
    const { cfg, observer, logger } = this.deps;
    if (session.record.gridStartMs === null) {
      session.record.gridStartMs = gridStartMs;
      this.deps.store.updateSession(session.record.streamId, { gridStartMs }).catch((err: unknown) => logger.warn({ err, streamId: session.record.streamId }, 'could not record the tick grid'));
    }
    session.runtime.ticker = new Ticker({
      periodMs: session.record.spec.intervalMs,
      maxInFlight: cfg.maxInFlight,
      onTick: async (tick) => (this.parts.local.selfFenced ? undefined : this.parts.inference.run(session, tick)),
      clock: this.clock,
      onSkip: () => observer?.tickSkipped?.(session.record.streamId),
      onError: (err) => logger.error({ err, streamId: session.record.streamId }, 'inference tick failed'),
    });
    session.runtime.ticker.start(gridStartMs, firstN);
  }
}

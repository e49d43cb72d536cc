/**
 * The timers of a stream this replica schedules: the lease check (the store's lease is the truth),
 * the upstream keepalive, the first-frame poll and the ticker on the stream's grid. What they find
 * (a lapsed lease, a gone upstream stream, a lost record) goes to the end path or the record
 * upkeep; the stream holds its timers and stops them all in `LiveStream.stop`.
 */
import { ATTR, inSpan } from '../../../lib/spans';
import { setLongTimeout } from '../../../lib/timers';
import type { Clock } from '../../../lib/timers';
import { isUpstreamStatus } from '../../../upstream/client';
import type { StreamRecord } from '../../store/store';
import type { TickInference } from './inference';
import type { StreamRegistry } from './registry';
import { LEASE_CHECK_RETRY_MS, firstUpstreamRenewalMs, lapsedLease, lapsedLeaseReason, leaseHolds, upstreamRenewal } from './lease';
import { ownedBy, resumePoint } from './ownership';
import type { RecordSync } from './record-sync';
import type { StreamEnd } from './end';
import type { LiveStream } from './live-stream';
import type { StreamsContext } from './ports';
import { Ticker } from './ticker';

export class StreamTimers {
  constructor(
    private readonly deps: StreamsContext,
    private readonly ender: StreamEnd,
    private readonly registry: StreamRegistry,
    private readonly sync: RecordSync,
    private readonly inference: TickInference,
  ) {}

  private get clock(): Clock {
    return this.deps.clock;
  }

  /**
   * Arms a stream's lease check (at its record's lease) and its upstream keepalive, for a stream
   * starting here from a create or an adoption (`firstUpstreamRenewalMs`).
   */
  arm(stream: LiveStream, from: 'create' | 'adopt'): void {
    this.armLease(stream, stream.record.leaseExpiresAtMs);
    this.armUpstreamKeepalive(stream, firstUpstreamRenewalMs(from, stream.upstreamLeaseSeconds, this.deps.cfg));
  }

  armLease(stream: LiveStream, expiresAtMs: number): void {
    stream.setLeaseCheck(setLongTimeout(() => void this.checkLease(stream), expiresAtMs - this.clock.now(), { clock: this.clock }));
  }

  /**
   * The store's lease is the truth (a keepalive may have landed on another replica): a ticking
   * stream learns it from its commits, so only a lease not seen renewed there is read. A store that
   * cannot be read is asked again later, and a lapsed lease is extended or ended as ./lease.ts
   * decides (`lapsedLease`): an outage of the store never ends a stream as lease_expired.
   */
  private async checkLease(stream: LiveStream, storeFailed = false): Promise<void> {
    if (stream.stopping) return;
    // A tick's commit already showed the store's lease renewed (a keepalive on another replica).
    if (!storeFailed && leaseHolds(stream.record.leaseExpiresAtMs, this.clock.now())) {
      return this.armLease(stream, stream.record.leaseExpiresAtMs);
    }
    let rec: StreamRecord | undefined;
    try {
      rec = await this.deps.store.getRecord(stream.id);
    } catch (err) {
      this.deps.logger.warn({ err, streamId: stream.id }, 'lease check could not read the store; retrying');
      return this.retryLeaseCheck(stream);
    }
    if (stream.stopping) return;
    const now = this.clock.now();
    if (!rec) {
      // The store lost the record: it is re-registered while this replica's own lease view holds.
      if (leaseHolds(stream.record.leaseExpiresAtMs, now)) {
        await this.sync.reRegister(stream);
        return this.armLease(stream, stream.record.leaseExpiresAtMs);
      }
    } else if (!ownedBy(rec, this.deps.replicaId)) {
      // Ended or owned elsewhere: it leaves this replica's bookkeeping (nothing upstream is ours to do).
      return this.registry.remove(stream.id);
    } else if (leaseHolds(rec.leaseExpiresAtMs, now)) {
      stream.extendLease(rec.leaseExpiresAtMs);
      return this.armLease(stream, rec.leaseExpiresAtMs);
    } else {
      const lapsed = lapsedLease(this.deps.cfg, rec.leaseExpiresAtMs, now, { storeFailed, storeHealth: this.deps.storeHealth });
      if (lapsed.then === 'retry') return this.retryLeaseCheck(stream);
      if (lapsed.then === 'extend') {
        const renewed = await this.deps.store.updateRecord(stream.id, { leaseExpiresAtMs: lapsed.toMs });
        if (renewed) {
          stream.extendLease(renewed.leaseExpiresAtMs);
          return this.armLease(stream, renewed.leaseExpiresAtMs);
        }
      }
    }
    await this.ender.end(stream.id, this.ender.reasons[lapsedLeaseReason(rec)]);
  }

  /** Asks again soon, remembering that the store failed (a lease that lapsed meanwhile is extended). */
  private retryLeaseCheck(stream: LiveStream): void {
    stream.setLeaseCheck(setLongTimeout(() => void this.checkLease(stream, true), LEASE_CHECK_RETRY_MS, { clock: this.clock }));
  }

  /**
   * Keeps the upstream lease alive on our own, from the lease the upstream last told, renewed and
   * retried as `upstreamRenewal` (./lease.ts) says. Traced as `legacy.upstream_keepalive`.
   */
  private armUpstreamKeepalive(stream: LiveStream, delayMs: number): void {
    const renew = () => {
      const { record } = stream;
      void inSpan('legacy.upstream_keepalive', { parent: 'root', link: record.ids, attributes: { [ATTR.streamId]: stream.id } }, () =>
        this.deps.upstream.keepalive(stream.apiKey, stream.id, { signal: stream.signal, ...record.ids }),
      ).then(
        (ka) => {
          stream.renewToken(ka.publish.token);
          stream.upstreamLeaseRenewed(ka.ttl_seconds);
          if (!stream.stopping) this.armUpstreamKeepalive(stream, upstreamRenewal(stream.upstreamLeaseSeconds, this.deps.cfg).everyMs);
        },
        async (err: unknown) => {
          await this.ender.onUpstreamLoss(stream, err);
          if (!stream.stopping) this.armUpstreamKeepalive(stream, upstreamRenewal(stream.upstreamLeaseSeconds, this.deps.cfg).retryMs);
        },
      );
    };
    stream.setUpstreamKeepalive(setLongTimeout(renew, delayMs, { clock: this.clock }));
  }

  /**
   * Polls (cheaply, backing off) until the upstream reports a first frame, then starts ticking; a
   * clip stream's first tick waits until the stream holds a full clip (frame mode starts at once).
   */
  waitForFirstFrame(stream: LiveStream, delayMs: number = this.deps.cfg.firstFramePollMs): void {
    const poll = this.clock.setTimeout(() => {
      this.deps.upstream
        .getStream(stream.apiKey, stream.id, { signal: stream.signal, ...stream.record.ids })
        .then((s) => {
          if (stream.stopping) return;
          if (s.state === 'ended') return void this.ender.endedUpstream(stream, s);
          if (s.last_frame_at_ms === null) return this.waitForFirstFrame(stream, Math.min(delayMs * 1.5, 2000));
          const spec = stream.record.spec;
          const short = spec.mode === 'clip' ? spec.clip.clipLengthMs - s.stream_time_ms : 0;
          this.startTicker(stream, this.clock.now() + Math.max(0, short));
        })
        .catch((err: unknown) => {
          if (stream.stopping) return;
          if (isUpstreamStatus(err, 404)) return void this.ender.onUpstreamLoss(stream, err);
          this.waitForFirstFrame(stream, Math.min(delayMs * 2, 5000));
        });
    }, delayMs);
    poll.unref?.();
    stream.setFirstFramePoll(poll);
  }

  /** An adopted stream resumes ticking on its record's grid (the next tick due, none replayed). */
  resumeTicking(stream: LiveStream, rec: StreamRecord): void {
    const at = resumePoint(rec, stream.record.spec.intervalMs, this.clock.now());
    this.startTicker(stream, at.gridStartMs, at.n);
  }

  /** Ticks from tick `firstN` on the grid starting at `gridStartMs` (a new stream: its first tick, recorded for a successor). */
  private startTicker(stream: LiveStream, gridStartMs: number, firstN = 0): void {
    const { cfg, observer, logger } = this.deps;
    if (stream.anchorGrid(gridStartMs)) {
      this.deps.store
        .updateRecord(stream.id, { gridStartMs })
        .catch((err: unknown) => logger.warn({ err, streamId: stream.id }, 'could not record the tick grid'));
    }
    const ticker = new Ticker({
      periodMs: stream.record.spec.intervalMs,
      maxInFlight: cfg.maxInFlight,
      onTick: async (tick) =>
        this.registry.selfFenced ? observer?.tickSkipped?.(stream.id, 'self_fenced') : this.inference.run(stream, tick),
      clock: this.clock,
      onSkip: (_tick, reason, count) => observer?.tickSkipped?.(stream.id, reason, count),
      onError: (err) => logger.error({ err, streamId: stream.id }, 'inference tick failed'),
    });
    stream.startTicking(ticker, gridStartMs, firstN);
  }
}

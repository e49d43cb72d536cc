/**
 * This replica's life in a fleet sharing one store (docs/scaling.md): heartbeat, membership sweep
 * with self-fencing, failover of a dead replica's streams (rendezvous claims), the control channel,
 * the owned-streams reconcile, the fleet-wide slot reconciler, and the drain: a draining replica
 * stays a member (heartbeat, control channel, reconcile) so its connections keep working, hands
 * its movable streams to replicas that are not draining, and is nobody's handover or failover target.
 * Whether it drains is the replica's lifecycle's (../lifecycle.ts), which the gateway moves.
 */
import type { FleetConfig } from '../../config';
import type { Logger } from '../../lib/logger';
import { realClock, setLongInterval } from '../../lib/timers';
import type { Clock, LongTimer } from '../../lib/timers';
import type { HandOverOptions, OwnerMessage } from '../legacy';
import type { Broker, Claims, Members, Membership, StreamRecord, StreamRecords, Slots, Unsubscribe } from '../store/store';
import { controlChannel, parseControl } from './control';
import type { FleetMember } from './member';
import { pickReplica } from './rendezvous';
import { reconcileSlots } from './slot-reconciler';

/** What the fleet asks of this replica's streams (`StreamMoves`, ../legacy/streams/moves.ts, implements it). */
export interface FleetStreams {
  readonly ownedIds: string[];
  selfFenced: boolean;
  adopt(rec: StreamRecord, how: 'failover' | 'handover'): Promise<boolean>;
  onOwnerMessage(msg: OwnerMessage): Promise<void>;
  /** Hands streams to `targetOf(id)`; `keepPinned`: pinned streams (and any without a target) stay here. */
  handOver(targetOf: (streamId: string) => string | undefined, opts?: HandOverOptions): Promise<number>;
  reconcileOwned(storeOwned: readonly string[]): Promise<void>;
}

/** What the fleet asks of the replica's lifecycle (../lifecycle.ts `LifecycleView` is one). */
export interface FleetLifecycle {
  /** False from the drain (`holding`) on: no takeovers here, and what can move is handed on. */
  readonly takesStreams: boolean;
}

export interface FleetOptions {
  /** Control channel, membership, run-once claims, the records it claims, the slots it reconciles. */
  store: Broker & Members & Claims & StreamRecords & Slots;
  replicaId: string;
  cfg: FleetConfig;
  streams: FleetStreams;
  lifecycle: FleetLifecycle;
  logger: Logger;
  clock?: Clock;
  /** Replicas alive as last seen (the `gateway_fleet_replicas` gauge). */
  onMembership?(alive: number): void;
  /** This replica cannot reach the upstream now (./upstream-reach.ts): its streams go to replicas that can. */
  upstreamImpaired?(): boolean;
}

/** How often the streams the store says are ours are compared with those running here. */
export const OWNED_RECONCILE_MS = 5000;
/**
 * How long a replica stays impaired (marked, taking nothing) before it hands its streams away and
 * answers /readyz 503. An upstream slow for every replica fails their ticks at about the same
 * time: within this grace the others are marked too, nobody is left to hand to, and no stream
 * moves for nothing. A replica cut alone loses only this much more of error results.
 */
export const IMPAIRED_GRACE_MS = 3000;
/** Key of the fleet-wide run-once slot reconciler. */
export const RECONCILE_SLOTS_KEY = 'reconcile-slots';

export class Fleet implements FleetMember {
  readonly solo = false;
  private readonly clock: Clock;
  private readonly timers: LongTimer[] = [];
  private unsubscribe: Unsubscribe | undefined;
  private lastBeatAtMs: number;
  private alive: string[] = [];
  /** When this replica first saw each dead replica dead (local clock): others claim after the backoff. */
  private readonly deadSince = new Map<string, number>();
  private sweeping = false;
  private stopped = false;
  /** This replica's impaired mark as last written to the store. */
  private markedImpaired = false;
  /** Impaired with a peer to yield to, at the last sweep (`yieldsToPeers`). */
  private yielding = false;
  /** When this replica last became impaired (local clock); undefined while it is not. */
  private impairedSinceMs: number | undefined;

  constructor(private readonly opts: FleetOptions) {
    this.clock = opts.clock ?? realClock;
    this.lastBeatAtMs = this.clock.now();
  }

  private get id(): string {
    return this.opts.replicaId;
  }

  /** Draining: no takeovers here; what can move is handed on at every sweep. */
  private get draining(): boolean {
    return !this.opts.lifecycle.takesStreams;
  }

  /** Joins: listens on the control channel, heartbeats once, then runs the loops. */
  async start(): Promise<void> {
    const { store, cfg, logger } = this.opts;
    this.unsubscribe = await store.subscribe(controlChannel(this.id), (text) => {
      const msg = parseControl(text);
      if (!msg) return void logger.warn({ channel: controlChannel(this.id) }, 'ignored a malformed control message');
      this.opts.streams
        .onOwnerMessage(msg)
        .catch((err: unknown) => logger.warn({ err, op: msg.op, streamId: msg.streamId }, 'control message failed'));
    });
    await this.beat();
    const every = (ms: number, fn: () => Promise<unknown>) =>
      this.timers.push(
        setLongInterval(() => void fn().catch((err: unknown) => logger.warn({ err }, 'fleet loop step failed')), ms, { clock: this.clock }),
      );
    every(cfg.heartbeatMs, () => this.beat());
    every(cfg.sweepMs, () => this.sweep());
    every(OWNED_RECONCILE_MS, () => this.reconcileOwned());
    every(cfg.reconcileMs, () => this.reconcileSlots());
    logger.info({ replica: this.id }, 'joined the fleet');
  }

  private async beat(): Promise<void> {
    try {
      await this.opts.store.heartbeat(this.id);
      // A survivor that saw this replica silent (a store pause) may have forgotten it, mark and all:
      // the mark comes back with the heartbeat, or it would turn into a handover target.
      if (this.draining) await this.opts.store.markDraining(this.id);
    } catch (err) {
      this.opts.logger.warn({ err }, 'heartbeat failed');
      return;
    }
    this.lastBeatAtMs = this.clock.now();
    if (this.opts.streams.selfFenced) {
      this.opts.streams.selfFenced = false;
      this.opts.logger.info('heartbeat back: ticking again');
    }
  }

  /** Self-fence check, membership, and the takeover of dead replicas' streams. */
  async sweep(): Promise<void> {
    if (this.sweeping || this.stopped) return;
    this.sweeping = true;
    const { store, cfg, logger, streams } = this.opts;
    try {
      if (!streams.selfFenced && this.clock.now() - this.lastBeatAtMs > cfg.fenceAfterMs) {
        streams.selfFenced = true;
        logger.warn(
          { fenceAfterMs: cfg.fenceAfterMs },
          'own heartbeat failing: ticking paused until it succeeds (a survivor may take the streams)',
        );
      }
      const m = await store.membership(cfg.deadAfterMs);
      this.alive = m.alive;
      this.opts.onMembership?.(m.alive.length);
      for (const d of [...this.deadSince.keys()]) if (!m.dead.includes(d)) this.deadSince.delete(d);
      // A fenced replica claims nothing: the fleet may already count it dead.
      if (streams.selfFenced || !m.alive.includes(this.id)) return;
      if (this.draining) return void (await this.moveOn(m));
      // Impaired with somewhere better to go: none is taken, and after the grace its streams leave
      // (else it works on as it can).
      const impaired = await this.upstreamImpaired(m);
      const now = this.clock.now();
      this.impairedSinceMs = impaired ? (this.impairedSinceMs ?? now) : undefined;
      const elsewhere = impaired && targetsIn(m, this.id).length > 0;
      this.yielding = elsewhere && now - this.impairedSinceMs! >= IMPAIRED_GRACE_MS;
      if (this.yielding) return void (await this.moveOn(m));
      if (elsewhere) return;
      const pickable = [this.id, ...targetsIn(m, this.id)];
      for (const dead of m.dead) if (dead !== this.id) await this.takeOver(dead, pickable);
    } finally {
      this.sweeping = false;
    }
  }

  /**
   * Keeps this replica's impaired mark in step with its reach of the upstream (re-asserted when the
   * store forgot it) and says whether it is impaired: then it hands its movable streams to replicas
   * that are not, and claims none of a dead replica's.
   */
  private async upstreamImpaired(m: Membership): Promise<boolean> {
    const impaired = this.opts.upstreamImpaired?.() ?? false;
    if (impaired !== this.markedImpaired || impaired !== m.impaired.includes(this.id)) {
      await this.opts.store.markImpaired(this.id, impaired);
      if (impaired !== this.markedImpaired) {
        if (impaired) this.opts.logger.warn('the upstream cannot be reached from here: handing streams to replicas that can reach it');
        else this.opts.logger.info('the upstream answers again: taking streams again');
      }
      this.markedImpaired = impaired;
    }
    return impaired;
  }

  /** Claims the streams of `dead`: its rendezvous pick (among replicas not draining) at once, any other replica after the backoff. */
  private async takeOver(dead: string, pickable: readonly string[]): Promise<void> {
    const { store, cfg, logger, streams } = this.opts;
    const now = this.clock.now();
    if (!this.deadSince.has(dead)) this.deadSince.set(dead, now);
    const late = now - this.deadSince.get(dead)! >= cfg.claimBackoffMs;
    const ids = await store.streamsOf(dead);
    if (ids.length === 0) {
      await store.forgetReplica(dead);
      this.deadSince.delete(dead);
      logger.info({ replica: dead }, 'dead replica owns no streams: forgotten');
      return;
    }
    for (const id of ids) {
      if (!late && pickReplica(id, pickable) !== this.id) continue;
      const rec = await store.getRecord(id);
      if (!rec || rec.state !== 'active' || rec.owner !== dead) continue;
      const claimed = await store.claimStream(id, { owner: dead, epoch: rec.epoch }, this.id);
      if (!claimed) continue;
      logger.warn({ streamId: id, from: dead, epoch: claimed.epoch }, 'claimed a stream of a dead replica');
      streams.adopt(claimed, 'failover').catch((err: unknown) => logger.error({ err, streamId: id }, 'adoption failed'));
    }
  }

  private async reconcileOwned(): Promise<void> {
    if (this.opts.streams.selfFenced) return;
    const { streams, store } = this.opts;
    await streams.reconcileOwned(await store.streamsOf(this.id, new Set(streams.ownedIds)));
  }

  private async reconcileSlots(): Promise<void> {
    const { store, cfg, logger } = this.opts;
    if (!(await store.claimOnce(RECONCILE_SLOTS_KEY, cfg.reconcileMs))) return;
    await reconcileSlots(store, cfg.deadAfterMs, logger);
  }

  /**
   * A connection drain begins, unless this is the last replica alive (then false: nobody could
   * take its streams, which end as on any shutdown). The gateway's lifecycle is `holding` already
   * (this replica takes no stream); announced to the fleet (nobody's target from now on), the loops
   * go on, and the streams that can move (not pinned to a relay here) are handed to replicas not
   * draining, now and at every sweep after (one may appear later).
   */
  async beginDrain(): Promise<boolean> {
    const { store, cfg, logger } = this.opts;
    try {
      const m = await store.membership(cfg.deadAfterMs);
      if (!m.alive.some((r) => r !== this.id)) return false;
      await store.markDraining(this.id);
      await this.moveOn(m);
      return true;
    } catch (err) {
      logger.warn({ err }, 'drain could not read the membership or announce itself: no drain, on to leaving');
      return false;
    }
  }

  /** Hands what can move to replicas not draining (none alive: it stays, and runs here): the drain, or an impaired replica yielding. */
  private async moveOn(m: Membership): Promise<number> {
    const { streams, logger } = this.opts;
    const targets = targetsIn(m, this.id);
    if (targets.length === 0 || streams.ownedIds.length === 0) return 0;
    const moved = await streams.handOver((streamId) => pickReplica(streamId, targets), { keepPinned: true });
    const step = this.draining ? 'drain' : 'upstream impaired';
    if (moved > 0) logger.info({ moved, to: targets.length }, `${step}: ${moved} streams handed over to ${targets.length} replicas`);
    return moved;
  }

  /**
   * The hand-over on leaving (after a drain, or without one): with replicas alive that are not
   * draining, hands every stream here to them (rendezvous pick; pinned ones end), then leaves the
   * membership. False when no such replica is left (streams end as on any shutdown).
   */
  async handOver(why?: string): Promise<boolean> {
    const { store, cfg, logger, streams } = this.opts;
    this.stopLoops();
    let others: string[];
    try {
      others = targetsIn(await store.membership(cfg.deadAfterMs), this.id);
    } catch (err) {
      logger.warn({ err }, 'leaving: could not read the membership, ending streams here');
      return false;
    }
    if (others.length === 0) return false;
    const moved = await streams.handOver((streamId) => pickReplica(streamId, others), { why });
    await store.forgetReplica(this.id);
    logger.info({ moved, to: others.length }, `leaving: ${moved} streams handed over to ${others.length} replicas`);
    return true;
  }

  /** Stops every loop and leaves the control channel (shutdown). */
  async stop(): Promise<void> {
    this.stopLoops();
  }

  private stopLoops(): void {
    this.stopped = true;
    for (const t of this.timers.splice(0)) t.clear();
    this.unsubscribe?.();
    this.unsubscribe = undefined;
  }

  /**
   * Marked impaired for `IMPAIRED_GRACE_MS` while, at the last sweep, a replica alive reached the
   * upstream: /readyz answers 503 so the balancer sends the new work (creates, keepalives) there.
   * When every replica is impaired, none yields: the balancer is never emptied by an upstream outage.
   */
  get yieldsToPeers(): boolean {
    return this.yielding;
  }

  /** Replicas alive at the last sweep. */
  get replicas(): readonly string[] {
    return this.alive;
  }
}

/** Replicas a stream may be handed or failed over to: alive, not draining, reaching the upstream, not `self`. */
function targetsIn(m: Membership, self: string): string[] {
  const excluded = new Set([...m.draining, ...m.impaired]);
  return m.alive.filter((r) => r !== self && !excluded.has(r));
}

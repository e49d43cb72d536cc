/**
 * Streams moving between replicas (docs/scaling.md): what the membership loop and the control
 * channel (../../fleet) ask of this replica's streams. Adopts a stream from its record (failover or
 * hand-over), hands streams over, acts on owner messages, and reconciles the streams the store says
 * are ours with those running here. `Fleet` is handed this object directly (`LegacyStreams.moves`).
 */
import { ATTR, inSpan } from '../../../lib/spans';
import type { StreamRecord } from '../../store/store';
import { tellOwner } from './end';
import type { StreamEnd } from './end';
import { legacyRecord, ownedBy } from './ownership';
import type { HandOverOptions, OwnerMessage, StreamsContext } from './ports';
import type { RecordSync } from './record-sync';
import type { StreamRegistry } from './registry';
import type { StreamStart } from './stream-start';
import { transportLostReason } from '../contract/closes';

export class StreamMoves {
  /**
   * Ids of the adoptions under way (an adopt message and the reconcile may both ask). Keyed by id,
   * not a phase of the stream: an adoption starts before its `LiveStream` exists, and a pinned
   * stream or one whose key cannot be opened is ended with none ever built. Once built and
   * registered, the stream is found by `registry.get` (phase `adopting`).
   */
  private readonly adopting = new Set<string>();

  constructor(
    private readonly deps: StreamsContext,
    private readonly registry: StreamRegistry,
    private readonly ender: StreamEnd,
    private readonly sync: RecordSync,
    /** The start-up path a create takes too (schema, media taken over, every timer armed). */
    private readonly starter: StreamStart,
  ) {}

  /** Pauses (true) or resumes ticking on every stream here (a replica whose heartbeat fails fences itself). */
  get selfFenced(): boolean {
    return this.registry.selfFenced;
  }

  set selfFenced(on: boolean) {
    this.registry.selfFenced = on;
  }

  /** Ids of the streams this replica schedules. */
  get ownedIds(): string[] {
    return this.registry.ids();
  }

  /** A control-channel message for this replica (src/gateway/fleet/control.ts). */
  async onOwnerMessage(msg: OwnerMessage): Promise<void> {
    if (msg.op === 'prompt') return this.sync.refreshPrompt(msg.streamId);
    if (msg.op === 'ended') return this.registry.remove(msg.streamId);
    const rec = await this.deps.store.getRecord(msg.streamId);
    if (ownedBy(rec, this.deps.replicaId)) await this.adopt(rec, 'handover');
  }

  /**
   * Takes over a stream whose record names this replica its owner (after a claim): opens the sealed
   * key and starts the stream from the record on the path a create takes (./stream-start.ts): every
   * timer armed, its media taken over (a room source re-joins the customer's room; a WHIP session
   * needs nothing), ticking resumed on the same grid. A pinned stream ends instead: its media (the webrtc relay) died with
   * its owner. False when it is already running here. Traced as
   * `legacy.adopt` (a trace of its own, linked to the create).
   */
  async adopt(rec: StreamRecord, how: 'failover' | 'handover'): Promise<boolean> {
    const id = rec.streamId;
    const { registry } = this;
    if (registry.get(id) || this.adopting.has(id) || !this.deps.lifecycle.startsStreams) return false;
    const attributes = { [ATTR.streamId]: id, [ATTR.adoptHow]: how, [ATTR.epoch]: rec.epoch, [ATTR.keyHash]: rec.keyHash };
    return inSpan('legacy.adopt', { parent: 'root', link: rec.ids, attributes }, () => this.adoptIn(rec, how));
  }

  private async adoptIn(rec: StreamRecord, how: 'failover' | 'handover'): Promise<boolean> {
    const id = rec.streamId;
    const { registry, ender } = this;
    if (registry.get(id) || this.adopting.has(id) || !this.deps.lifecycle.startsStreams) return false;
    this.adopting.add(id);
    const { logger } = this.deps;
    try {
      const record = legacyRecord(rec);
      if (rec.pinned) {
        // Its media lived in the dead owner's process (the webrtc relay).
        await ender.end(id, transportLostReason(record.spec.transport === 'room' ? 'room' : 'webrtc', this.deps.brand));
        return false;
      }
      const apiKey = ender.openKey(rec);
      if (!apiKey) {
        logger.error({ streamId: id }, "cannot open the stream's sealed key (is GATEWAY_SECRET the same on every replica?): ending it");
        await ender.end(id, ender.reasons.serverShutdown);
        return false;
      }
      if (!(await this.starter.start(record, apiKey, { from: 'adopt', rec }))) return false;
      this.deps.observer?.streamAdopted?.(id, how);
      logger.info({ streamId: id, how, epoch: rec.epoch, key: rec.keyHash }, 'legacy stream adopted');
      return true;
    } finally {
      this.adopting.delete(id);
    }
  }

  /**
   * Hands every stream here to `targetOf(streamId)` (claim under this replica's epoch, then `adopt`
   * on the target's control channel), after stopping its ticks here. A pinned stream (its relay lives
   * here) and one without a target end as at any shutdown (no creates or adoptions here after), or,
   * with `keepPinned` (a drain, or an impaired replica yielding to peers), stay and run here.
   * Returns how many moved.
   */
  async handOver(targetOf: (streamId: string) => string | undefined, opts: HandOverOptions = {}): Promise<number> {
    const { registry, ender } = this;
    const { store, logger, replicaId } = this.deps;
    let moved = 0;
    await Promise.all(
      registry.streams().map(async ({ id, record }) => {
        const target = record.pinned ? undefined : targetOf(id);
        if (!target && opts.keepPinned) return;
        if (opts.why) logger.info({ streamId: id, to: target }, `${opts.why}: stream ${target ? 'handed over' : 'ended'}`);
        if (!target) return void (await ender.end(id, ender.reasons.serverShutdown));
        const attributes = { [ATTR.streamId]: id, [ATTR.handoverTo]: target, [ATTR.epoch]: record.epoch };
        await inSpan('legacy.handover', { parent: 'root', link: record.ids, attributes }, async (span) => {
          await registry.remove(id);
          const claimed = await store.claimStream(id, { owner: replicaId, epoch: record.epoch }, target);
          span?.setAttribute(ATTR.handoverClaimed, Boolean(claimed));
          if (!claimed) return;
          tellOwner(this.deps, target, { op: 'adopt', streamId: id });
          moved++;
          logger.info({ streamId: id, to: target }, 'legacy stream handed over');
        });
      }),
    );
    return moved;
  }

  /**
   * Compares the streams the store says this replica owns with those running here: a lost `adopt`
   * is adopted, a stream ended or claimed elsewhere stops here (the periodic check behind lost messages).
   */
  async reconcileOwned(storeOwned: readonly string[]): Promise<void> {
    const { registry } = this;
    const { store, replicaId } = this.deps;
    const owned = new Set(storeOwned);
    for (const id of owned) {
      // A create is registered (phase `creating`) before its record is written.
      if (registry.get(id)) continue;
      const rec = await store.getRecord(id);
      if (ownedBy(rec, replicaId)) await this.adopt(rec, 'handover');
    }
    for (const stream of registry.streams()) {
      const id = stream.id;
      if (owned.has(id) || stream.stopping || stream.phase === 'creating') continue;
      const rec = await store.getRecord(id);
      if (!rec) await this.sync.reRegister(stream);
      else if (!ownedBy(rec, replicaId)) await registry.remove(id);
    }
  }
}

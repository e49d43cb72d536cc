/**
 * The fleet side of legacy sessions (docs/scaling.md): what the membership loop and the control
 * channel (../fleet) ask of this replica's streams. Adopts a stream from its record (failover or
 * drain), hands streams over, acts on owner messages, re-registers a record the store lost, reads a
 * tick commit's answer, and reconciles the streams the store says are ours with those running here.
 * The lifecycle (./sessions.ts) owns the live sessions and lends them through `SessionHost`.
 */
import type { ValidateFunction } from 'ajv';
import type { JsonSchemaValidators } from '../../lib/json-schema';
import { realClock } from '../../lib/timers';
import type { Clock } from '../../lib/timers';
import { newTraceId } from '../../upstream/trace';
import type { SessionRecord, TickCommit } from '../store/store';
import { compileOutputSchema } from './output-schema';
import { recordOf } from './ownership';
import type { LiveSession, OwnerMessage, SessionDeps } from './session-ports';
import type { SessionTimers } from './session-timers';
import type { LegacyEndReasons, SessionSpec } from './translate';
import { legacyThreadId, transportLostReason } from './translate';

/** What the fleet side uses of the lifecycle (LegacySessions builds it over its own state). */
export interface SessionHost {
  readonly replicaId: string;
  readonly reasons: LegacyEndReasons;
  readonly schemas: JsonSchemaValidators;
  /** The streams this replica schedules. */
  readonly live: ReadonlyMap<string, LiveSession>;
  /** Streams whose record is being written by their create (the owned-streams reconcile leaves them be). */
  readonly creating: ReadonlySet<string>;
  isClosing(): boolean;
  /** No more creates or adoptions here (drain, crash). */
  close(): void;
  /** Remembers an upstream stream this process may delete (`closeAll`); `disown` forgets one, or all. */
  own(streamId: string, apiKey: string): void;
  disown(streamId?: string): void;
  track(session: LiveSession): void;
  stopLocal(session: LiveSession): Promise<void>;
  end(streamId: string, reason: string): Promise<boolean>;
  /** The client's key from a record (in memory here, else unsealed). */
  openKey(rec: SessionRecord): string | undefined;
  /** Lease, upstream keepalive, first-frame wait and ticker of an adopted stream. */
  readonly timers: Pick<SessionTimers, 'arm' | 'waitForFirstFrame' | 'resumeTicking'>;
}

export class SessionFleet {
  /** Pauses (true) or resumes ticking on every stream here (a replica whose heartbeat fails fences itself). */
  selfFenced = false;
  /** Streams being adopted right now (an adopt message and the reconcile may both ask). */
  private readonly adopting = new Set<string>();
  private readonly reRegistering = new Set<string>();
  private readonly clock: Clock;

  constructor(
    private readonly deps: SessionDeps,
    private readonly host: SessionHost,
  ) {
    this.clock = deps.clock ?? realClock;
  }

  /** A tick's commit answer: a new prompt revision is read; a lost stream stops here; a lost record is re-registered. */
  onCommit(session: LiveSession, tick: number, commit: TickCommit): void {
    if (commit.ok) {
      session.lastTick = Math.max(session.lastTick, tick);
      if (commit.promptRev !== session.promptRev) void this.refreshPrompt(session.streamId);
      return;
    }
    this.deps.observer?.tickFenced?.(commit.reason);
    if (commit.reason === 'duplicate') return;
    if (commit.reason === 'missing') return void this.reRegister(session);
    this.deps.logger.info({ streamId: session.streamId, reason: commit.reason }, 'tick refused by the store: stream owned or ended elsewhere, stopping here');
    void this.host.stopLocal(session);
  }

  /** Reads the stream's prompt from the store (a PATCH served by another replica). */
  async refreshPrompt(streamId: string): Promise<void> {
    const session = this.host.live.get(streamId);
    if (!session) return;
    const rec = await this.deps.store.getSession(streamId);
    if (rec?.state === 'active' && rec.owner === this.host.replicaId && !session.ending) {
      session.prompt = rec.prompt;
      session.promptRev = rec.promptRev;
    }
  }

  /** Writes a lost record back from memory under a new epoch and takes its slot again (the store restarted empty). */
  async reRegister(session: LiveSession): Promise<void> {
    if (this.reRegistering.has(session.streamId) || session.ending) return;
    this.reRegistering.add(session.streamId);
    const { store, logger, cfg } = this.deps;
    const replicaId = this.host.replicaId;
    try {
      session.epoch += 1;
      await store.putSession(recordOf(session, replicaId, this.clock.now()));
      if (!(await store.acquireSlot(session.keyHash, session.slotId, cfg.maxStreamsPerKey, replicaId))) {
        logger.warn({ streamId: session.streamId, key: session.keyHash }, 're-registered stream found its key at the stream limit');
      }
      await store.bindSlot(session.keyHash, session.slotId, session.streamId);
      logger.warn({ streamId: session.streamId, epoch: session.epoch }, 'store had lost the stream: re-registered from this replica');
    } catch (err) {
      logger.warn({ err, streamId: session.streamId }, 'could not re-register a lost stream; retried at the next tick');
    } finally {
      this.reRegistering.delete(session.streamId);
    }
  }

  /** A control-channel message for this replica (src/gateway/fleet/control.ts). */
  async onOwnerMessage(msg: OwnerMessage): Promise<void> {
    if (msg.op === 'prompt') return this.refreshPrompt(msg.streamId);
    if (msg.op === 'ended') {
      const session = this.host.live.get(msg.streamId);
      if (session) await this.host.stopLocal(session);
      this.host.disown(msg.streamId);
      return;
    }
    const rec = await this.deps.store.getSession(msg.streamId);
    if (rec?.state === 'active' && rec.owner === this.host.replicaId) await this.adopt(rec, 'handover');
  }

  /**
   * Takes over a stream whose record names this replica its owner (after a claim): opens the sealed
   * key, rebuilds the live session from the record, arms its lease and upstream keepalive, re-joins a
   * room source and resumes ticking on the same grid. A pinned (webrtc) stream ends instead: its
   * media relay died with its owner. False when it is already running here.
   */
  async adopt(rec: SessionRecord, how: 'failover' | 'handover'): Promise<boolean> {
    const id = rec.streamId;
    const host = this.host;
    if (host.live.has(id) || this.adopting.has(id) || host.isClosing()) return false;
    this.adopting.add(id);
    const { logger } = this.deps;
    try {
      if (rec.pinned) {
        await host.end(id, transportLostReason('webrtc', this.deps.brand));
        return false;
      }
      const apiKey = host.openKey(rec);
      if (!apiKey) {
        logger.error({ streamId: id }, 'cannot open the stream\'s sealed key (is GATEWAY_SECRET the same on every replica?): ending it');
        await host.end(id, host.reasons.serverShutdown);
        return false;
      }
      const session = this.sessionOf(rec, apiKey);
      host.track(session);
      host.own(id, apiKey);
      host.timers.arm(session, rec.leaseExpiresAtMs);
      if (session.spec.transport === 'room') await this.rejoinRoom(session);
      if (session.ending) return false;
      if (rec.gridStartMs === null) host.timers.waitForFirstFrame(session);
      else host.timers.resumeTicking(session, rec);
      this.deps.observer?.sessionAdopted?.(id, how);
      logger.info({ streamId: id, how, epoch: rec.epoch, key: rec.keyHash }, 'legacy stream adopted');
      return true;
    } finally {
      this.adopting.delete(id);
    }
  }

  /** The live session of an adopted record (its output schema compiled again here). */
  private sessionOf(rec: SessionRecord, apiKey: string): LiveSession {
    const id = rec.streamId;
    const spec = rec.spec as SessionSpec;
    let validate: ValidateFunction | undefined;
    try {
      validate = spec.outputSchema ? compileOutputSchema(this.host.schemas, spec.outputSchema) : undefined;
    } catch (err) {
      this.deps.logger.warn({ err, streamId: id }, 'adopted stream\'s output schema does not compile here; results go unchecked');
    }
    return {
      streamId: id,
      apiKey,
      keyHash: rec.keyHash,
      slotId: rec.slotId,
      accountId: rec.accountId,
      spec,
      prompt: rec.prompt,
      threadId: legacyThreadId(id),
      ids: rec.ids.traceId ? { ...rec.ids } : { traceId: newTraceId() },
      fallbackModels: [...rec.fallbackModels],
      validate,
      abort: new AbortController(),
      publishToken: '',
      ending: false,
      epoch: rec.epoch,
      promptRev: rec.promptRev,
      createdAtMs: rec.createdAtMs,
      leaseExpiresAtMs: rec.leaseExpiresAtMs,
      gridStartMs: rec.gridStartMs,
      lastTick: rec.lastTick,
      pinned: rec.pinned,
      sealedKey: rec.sealedKey,
    };
  }

  /** A room source's relay died with its previous owner: join the customer's room again from here. */
  private async rejoinRoom(session: LiveSession): Promise<void> {
    const { media, upstream, brand, logger } = this.deps;
    if (!media) return;
    try {
      const ka = await upstream.keepalive(session.apiKey, session.streamId, session.ids);
      session.publishToken = ka.publish.token;
      if (!ka.publish.url) throw new Error('the upstream keepalive named no publish url');
      await media.start({
        spec: session.spec,
        streamId: session.streamId,
        publishUrl: ka.publish.url,
        publishToken: ka.publish.token,
        onLost: () => void this.host.end(session.streamId, transportLostReason('room', brand)),
      });
    } catch (err) {
      logger.warn({ err, streamId: session.streamId }, 'could not re-join the room source');
      await this.host.end(session.streamId, transportLostReason('room', brand));
    }
  }

  /**
   * Drain: hands every stream here to `targetOf(streamId)` (claim under this replica's epoch, then
   * `adopt` on the target's control channel), after stopping its ticks here. Pinned streams end as
   * at any shutdown. Returns how many were handed over.
   */
  async handOver(targetOf: (streamId: string) => string | undefined): Promise<number> {
    const host = this.host;
    host.close();
    const { store, logger } = this.deps;
    let moved = 0;
    await Promise.all(
      [...host.live.values()].map(async (session) => {
        const target = targetOf(session.streamId);
        if (session.pinned || !target) return void (await host.end(session.streamId, host.reasons.serverShutdown));
        await host.stopLocal(session);
        host.disown(session.streamId);
        const claimed = await store.claimSession(session.streamId, { owner: host.replicaId, epoch: session.epoch }, target);
        if (!claimed) return;
        this.tell(target, { op: 'adopt', streamId: session.streamId });
        moved++;
        logger.info({ streamId: session.streamId, to: target }, 'legacy stream handed over');
      }),
    );
    return moved;
  }

  /**
   * Compares the streams the store says this replica owns with those running here: a lost `adopt`
   * is adopted, a stream ended or claimed elsewhere stops here (the periodic check behind lost messages).
   */
  async reconcileOwned(storeOwned: readonly string[]): Promise<void> {
    const { store } = this.deps;
    const { live, creating, replicaId } = this.host;
    const owned = new Set(storeOwned);
    for (const id of owned) {
      if (live.has(id) || creating.has(id)) continue;
      const rec = await store.getSession(id);
      if (rec?.state === 'active' && rec.owner === replicaId) await this.adopt(rec, 'handover');
    }
    for (const session of [...live.values()]) {
      if (owned.has(session.streamId) || session.ending || creating.has(session.streamId)) continue;
      const rec = await store.getSession(session.streamId);
      if (!rec) await this.reRegister(session);
      else if (rec.state !== 'active' || rec.owner !== replicaId) await this.host.stopLocal(session);
    }
  }

  /** Test seam of a crash: every timer here stops and nothing is written to the store (the fleet's view of a dead replica). */
  async halt(): Promise<void> {
    this.host.close();
    await Promise.all([...this.host.live.values()].map((s) => this.host.stopLocal(s)));
    this.host.disown();
  }

  /** Fire and forget: a lost control message is caught by the tick commit and the periodic reconcile. */
  tell(replica: string, msg: OwnerMessage): void {
    this.deps.fleet?.tell(replica, msg).catch((err: unknown) => this.deps.logger.warn({ err, replica, op: msg.op }, 'control message not sent'));
  }
}

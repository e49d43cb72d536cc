import { randomUUID } from 'node:crypto';
import type { ValidateFunction } from 'ajv';
import { JsonSchemaValidators } from '../../lib/json-schema';
import { keyHash } from '../../lib/keys';
import { realClock } from '../../lib/timers';
import type { Clock } from '../../lib/timers';
import { UpstreamError, isUpstreamStatus } from '../../upstream/client';
import type { CallOptions } from '../../upstream/client';
import { newTraceId } from '../../upstream/trace';
import type { SessionRecord } from '../store/store';
import { accessError, streamAccess } from './access';
import { LEGACY_ERRORS } from './errors';
import { TickInference } from './inference';
import { compileOutputSchema } from './output-schema';
import { endEnvelope, resultsChannel } from './results-socket';
import { recordOf } from './ownership';
import { SessionFleet } from './session-fleet';
import type { SessionHost } from './session-fleet';
import { SOLO_REPLICA } from './session-ports';
import type { CreateInput, CreateOutput, LiveSession, OwnerMessage, SessionDeps } from './session-ports';
import { SessionTimers } from './session-timers';
import type { LegacyMedia, SessionSpec } from './translate';
import { legacyEndReasons, legacyRoomToken, legacyThreadId, microcentsToCents, transportLostReason } from './translate';
import { UPSTREAM_CONTEXTS, toLegacyError } from './upstream-errors';
import type { UpstreamCallContext } from './upstream-errors';

/**
 * Legacy sessions: create (slot → upstream stream → record → scheduler), keepalives, prompt, and
 * the one end path every exit goes through, on any replica of a fleet. This replica schedules the
 * streams it owns (`live`); the store's record is the truth for the rest. A live stream's timers
 * (lease check, upstream keepalive, first-frame wait, ticker) are ./session-timers.ts; the fleet
 * side (adopt, hand over, owner messages, reconcile), driven by ../fleet, is ./session-fleet.ts.
 */
export class LegacySessions {
  private readonly live = new Map<string, LiveSession>();
  /**
   * Upstream streams this process created and has not seen deleted (id → key): a failed delete or
   * an abandoned create leaves one here, and `closeAll` deletes what is left.
   */
  private readonly owned = new Map<string, string>();
  /** The legacy end reasons (close reasons of 1001), vendor-named where the vendor shows. */
  readonly reasons;
  private closing = false;
  /** Streams whose record is being written by their create (the owned-streams reconcile leaves them be). */
  private readonly creating = new Set<string>();
  /** Output-schema validators, cached by content (streams re-sending one schema compile it once). */
  readonly schemas: JsonSchemaValidators;
  private readonly clock: Clock;
  private readonly inference: TickInference;
  private readonly fleetSide: SessionFleet;
  private readonly timers: SessionTimers;

  constructor(private readonly deps: SessionDeps) {
    this.reasons = legacyEndReasons(deps.brand);
    this.schemas = new JsonSchemaValidators({ maxEntries: 256, logger: deps.logger });
    this.clock = deps.clock ?? realClock;
    this.timers = new SessionTimers(deps, {
      replicaId: this.replicaId,
      reasons: this.reasons,
      end: (streamId, reason, opts) => this.end(streamId, reason, opts),
      stopLocal: (session) => this.stopLocal(session),
      reRegister: (session) => this.fleetSide.reRegister(session),
      // A self-fenced replica (its heartbeat failing) lets the ticks pass: a successor may own them.
      tick: async (session, tick) => (this.fleetSide.selfFenced ? undefined : this.inference.run(session, tick)),
    });
    this.fleetSide = new SessionFleet(deps, this.hostForFleet());
    this.inference = new TickInference(deps, {
      outOfCredits: (session) => void this.end(session.streamId, this.reasons.insufficientCredits),
      upstreamLost: (session, err) => void this.timers.onUpstreamLoss(session, err),
      committed: (session, tick, commit) => this.fleetSide.onCommit(session, tick, commit),
    });
  }

  /** This replica's id: the owner written into the records of the streams it schedules. */
  get replicaId(): string {
    return this.deps.fleet?.replicaId ?? SOLO_REPLICA;
  }

  private get leaseMs(): number {
    return this.deps.cfg.leaseTtlSeconds * 1000;
  }

  get activeCount(): number {
    return this.live.size;
  }

  /** The upstream's model ids (the default fallback list), upstream failures mapped. */
  private async modelIds(): Promise<string[]> {
    try {
      return await this.deps.catalog.modelIds();
    } catch (err) {
      throw this.mapUpstreamError(err, UPSTREAM_CONTEXTS.models);
    }
  }

  /** Creates a legacy stream. Throws legacy ServiceErrors (429, 401/402/403, 503, 502). */
  async create(input: CreateInput): Promise<CreateOutput> {
    const { cfg, store, upstream } = this.deps;
    if (this.closing) throw LEGACY_ERRORS.shuttingDown();
    if (input.spec.transport !== 'native') this.deps.media?.check?.(input.spec);
    // Before the slot and the upstream stream: a models failure here must leave nothing behind.
    const fallbackModels = (cfg.fallbackModels ?? (await this.modelIds())).filter((m) => m !== input.spec.model);
    const kh = keyHash(input.apiKey);
    const slotId = randomUUID();
    if (!(await store.acquireSlot(kh, slotId, cfg.maxStreamsPerKey, this.replicaId))) {
      throw LEGACY_ERRORS.concurrentStreamLimit(cfg.maxStreamsPerKey);
    }
    const traceId = input.traceId ?? newTraceId();
    let created;
    try {
      // Not given the client's signal: an aborted create may still have created a stream, and only
      // its answer tells us which one to delete.
      created = await upstream.createStream(input.apiKey, { requestId: input.requestId, traceId });
    } catch (err) {
      await store.releaseSlot(kh, slotId);
      throw this.mapUpstreamError(err, UPSTREAM_CONTEXTS.create);
    }
    this.owned.set(created.id, input.apiKey);
    if (input.signal?.aborted) {
      // The client gave up while the upstream was creating: nobody will use or delete this stream.
      await store.releaseSlot(kh, slotId);
      await this.deleteUpstream(input.apiKey, created.id, { requestId: input.requestId, traceId });
      throw LEGACY_ERRORS.clientClosedRequest();
    }
    let validate: ValidateFunction | undefined;
    try {
      // Compiled only now: an unauthenticated, slot-less or credit-less caller never costs a compile.
      validate = input.spec.outputSchema ? compileOutputSchema(this.schemas, input.spec.outputSchema) : undefined;
    } catch (err) {
      await store.releaseSlot(kh, slotId);
      await this.deleteUpstream(input.apiKey, created.id, { requestId: input.requestId, traceId });
      throw err;
    }
    const now = this.clock.now();
    const session: LiveSession = {
      streamId: created.id,
      apiKey: input.apiKey,
      keyHash: kh,
      slotId,
      accountId: input.accountId,
      spec: input.spec,
      prompt: input.spec.prompt,
      threadId: legacyThreadId(created.id),
      ids: { requestId: input.requestId, traceId },
      fallbackModels,
      validate,
      abort: new AbortController(),
      publishToken: created.publish.token,
      ending: false,
      epoch: 1,
      promptRev: 0,
      createdAtMs: now,
      leaseExpiresAtMs: now + this.leaseMs,
      gridStartMs: null,
      lastTick: -1,
      // A webrtc relay lives in this process: the stream cannot outlive it on another replica.
      pinned: input.spec.transport === 'webrtc',
      sealedKey: this.deps.fleet?.sealer?.seal(input.apiKey, created.id) ?? '',
    };
    this.creating.add(created.id);
    this.track(session);
    try {
      await store.putSession(recordOf(session, this.replicaId, now));
      // Bound after the record exists: the reconciler frees a bound slot whose record is gone or ended.
      await store.bindSlot(kh, slotId, created.id);
    } catch (err) {
      // The store failed mid-create: leave nothing behind (the slot may stay until the reconciler frees it).
      await this.stopLocal(session);
      await store.releaseSlot(kh, slotId).catch(() => undefined);
      await this.deleteUpstream(input.apiKey, created.id, session.ids);
      throw err;
    } finally {
      this.creating.delete(created.id);
    }

    let media: LegacyMedia = { transport: 'native', url: created.publish.url, token: created.publish.token };
    if (input.spec.transport !== 'native') {
      try {
        if (!this.deps.media) throw LEGACY_ERRORS.unsupportedSource(input.spec.transport);
        media = await this.deps.media.start({
          spec: input.spec,
          streamId: created.id,
          publishUrl: created.publish.url,
          publishToken: created.publish.token,
          onLost: () => void this.end(created.id, transportLostReason(input.spec.transport as 'webrtc' | 'room', this.deps.brand)),
        });
      } catch (err) {
        await this.end(created.id, this.reasons.clientRequested);
        throw err;
      }
    }
    if (this.closing) {
      // Shutdown began while this create was in flight: do not hand out a stream that is about to end.
      await this.end(created.id, this.reasons.serverShutdown);
      throw LEGACY_ERRORS.shuttingDown();
    }
    this.timers.arm(session, session.leaseExpiresAtMs);
    this.timers.waitForFirstFrame(session);
    this.deps.observer?.streamCreated?.(kh, input.spec);
    return { streamId: created.id, ttlSeconds: cfg.leaseTtlSeconds, media };
  }

  /** A session record for a caller: 404 unknown, 403 another account's. */
  async recordFor(streamId: string, accountId: string): Promise<SessionRecord> {
    const access = streamAccess(await this.deps.store.getSession(streamId), accountId);
    if (!access.ok) throw accessError(access.refusal, streamId);
    return access.record;
  }

  /**
   * Legacy keepalive, on any replica: renews the lease in the store and reports the cost since the
   * previous keepalive (the store's counter, whichever replica served that one), credits and state.
   */
  async keepalive(streamId: string, apiKey: string, accountId: string, ids: { requestId?: string; traceId?: string } = {}) {
    const { store, upstream, cfg } = this.deps;
    const rec = await this.recordFor(streamId, accountId);
    if (rec.state === 'ended') {
      throw LEGACY_ERRORS.streamEnded(streamId, rec.endReason ?? 'ended');
    }
    const balance = await upstream.balance(apiKey, ids).catch((err: unknown) => {
      throw this.mapUpstreamError(err, UPSTREAM_CONTEXTS.balance);
    });
    if (balance.balance_microcents <= 0) {
      // No credits: the lease is not renewed and the stream ends, as the service did.
      await this.end(streamId, this.reasons.insufficientCredits, { apiKey });
      throw LEGACY_ERRORS.insufficientCredits();
    }
    // Renewed before the upstream calls, as the service did: a slow upstream must not lapse the lease.
    const now = this.clock.now();
    const renewed = await store.renewLease(streamId, now + this.leaseMs, now);
    if (!renewed) {
      const after = await store.getSession(streamId);
      throw LEGACY_ERRORS.streamEnded(streamId, after?.endReason ?? 'ended');
    }
    let ka;
    let upstreamStream;
    try {
      // The upstream keepalive also hands out a fresh publish token.
      ka = await upstream.keepalive(apiKey, streamId, ids);
      upstreamStream = await upstream.getStream(apiKey, streamId, ids);
    } catch (err) {
      if (isUpstreamStatus(err, 404)) {
        await this.end(streamId, this.reasons.leaseExpired, { apiKey });
        throw LEGACY_ERRORS.streamEndedUpstream(streamId);
      }
      throw this.mapUpstreamError(err, UPSTREAM_CONTEXTS.keepalive);
    }
    const session = this.live.get(streamId);
    if (session) {
      session.publishToken = ka.publish.token;
      this.deps.media?.renewToken?.(streamId, ka.publish.token);
      session.leaseExpiresAtMs = renewed.record.leaseExpiresAtMs;
      this.timers.armLease(session, session.leaseExpiresAtMs);
    }
    return {
      streamId,
      ttlSeconds: cfg.leaseTtlSeconds,
      creditsRemainingCents: balance.balance_cents,
      costCents: microcentsToCents(renewed.costMicrocents),
      secondsCharged: Math.max(0, Math.round((now - renewed.sinceMs) / 1000)),
      lastFrameAtMs: upstreamStream.last_frame_at_ms,
      roomToken: legacyRoomToken(rec.spec as SessionSpec | undefined, ka.publish.token),
    };
  }

  /** Prompt PATCH, on any replica: the store takes it; the owner's next tick uses it (told, or noticed at commit). */
  async updatePrompt(streamId: string, accountId: string, prompt: string): Promise<SessionRecord> {
    const rec = await this.recordFor(streamId, accountId);
    if (rec.state === 'ended') throw LEGACY_ERRORS.streamEnded(streamId);
    const next = await this.deps.store.setPrompt(streamId, prompt, this.clock.now());
    if (!next) throw LEGACY_ERRORS.streamEnded(streamId);
    const session = this.live.get(streamId);
    if (session) {
      session.prompt = next.prompt;
      session.promptRev = next.promptRev;
    } else if (next.owner && next.owner !== this.replicaId) {
      this.fleetSide.tell(next.owner, { op: 'prompt', streamId });
    }
    return next;
  }

  /**
   * The one end path, on any replica: the store's `endSession` picks one winner fleet-wide, which
   * releases the slot, keeps a tombstone, closes every socket (1001 + reason, through the results
   * channel), deletes the upstream stream and tells the owner to stop. The owner's local scheduler
   * and media stop wherever it runs. Idempotent; true only for the winner.
   */
  async end(streamId: string, reason: string, opts: { deleteUpstream?: boolean; apiKey?: string } = {}): Promise<boolean> {
    const { store, logger, cfg } = this.deps;
    const session = this.live.get(streamId);
    if (session?.ending) return false;
    if (session) session.ending = true;
    const now = this.clock.now();
    let before: SessionRecord | undefined;
    try {
      before = await store.endSession(streamId, reason, now);
      // The store lost the record (restarted empty): the owner still cleans up what it holds.
      if (!before && session && !(await store.getSession(streamId))) before = recordOf(session, this.replicaId, now);
    } catch (err) {
      if (session) session.ending = false;
      throw err;
    }
    if (session) await this.stopLocal(session);
    if (!before) {
      // Another call or replica ended it first and did the rest.
      this.owned.delete(streamId);
      return false;
    }
    await store.expireSession(streamId, cfg.tombstoneSeconds * 1000);
    await store.releaseSlot(before.keyHash, before.slotId);
    await store.publish(resultsChannel(streamId), endEnvelope(reason));
    this.deps.observer?.streamEnded?.(before.keyHash, reason);
    logger.info({ streamId, reason, key: before.keyHash }, 'legacy stream ended');
    if (before.owner && before.owner !== this.replicaId) this.fleetSide.tell(before.owner, { op: 'ended', streamId, reason });
    const key = session?.apiKey ?? opts.apiKey ?? this.openKey(before);
    const ids = session?.ids ?? (before.ids.traceId ? before.ids : {});
    if (opts.deleteUpstream !== false && key) await this.deleteUpstream(key, streamId, ids);
    else this.owned.delete(streamId);
    return true;
  }

  /** Deletes an upstream stream (the client retries with backoff); a failure leaves it owned for `closeAll`. */
  private async deleteUpstream(apiKey: string, streamId: string, opts: CallOptions = {}): Promise<void> {
    try {
      await this.deps.upstream.deleteStream(apiKey, streamId, opts);
      this.owned.delete(streamId);
    } catch (err) {
      this.owned.set(streamId, apiKey);
      this.deps.logger.warn({ err, streamId }, 'upstream delete failed after retries; retried at shutdown, else its lease expires it');
    }
  }

  /** Upstream streams created here and not yet deleted (ids). */
  get undeletedUpstreamStreams(): string[] {
    return [...this.owned.keys()];
  }

  /** Ends every live session, then deletes every upstream stream this process still owns (shutdown). */
  async closeAll(reason: string = this.reasons.serverShutdown): Promise<void> {
    this.closing = true;
    await Promise.all([...this.live.keys()].map((id) => this.end(id, reason)));
    await Promise.all([...this.owned].map(([id, key]) => this.deleteUpstream(key, id)));
  }

  // ── Fleet: what the membership loop and the control channel ask (./session-fleet.ts does it). ──

  /** Pauses (true) or resumes ticking on every stream here (a replica whose heartbeat fails fences itself). */
  get selfFenced(): boolean {
    return this.fleetSide.selfFenced;
  }

  set selfFenced(on: boolean) {
    this.fleetSide.selfFenced = on;
  }

  /** Ids of the streams this replica schedules. */
  get ownedIds(): string[] {
    return [...this.live.keys()];
  }

  /** Reads the stream's prompt from the store (a PATCH served by another replica). */
  refreshPrompt(streamId: string): Promise<void> {
    return this.fleetSide.refreshPrompt(streamId);
  }

  /** A control-channel message for this replica (src/gateway/fleet/control.ts). */
  onOwnerMessage(msg: OwnerMessage): Promise<void> {
    return this.fleetSide.onOwnerMessage(msg);
  }

  /** Takes over a stream whose record names this replica its owner (failover or drain); false when it runs here already. */
  adopt(rec: SessionRecord, how: 'failover' | 'handover'): Promise<boolean> {
    return this.fleetSide.adopt(rec, how);
  }

  /** Drain: hands every stream here to `targetOf(streamId)`; returns how many were handed over. */
  handOver(targetOf: (streamId: string) => string | undefined): Promise<number> {
    return this.fleetSide.handOver(targetOf);
  }

  /** Compares the streams the store says this replica owns with those running here (lost messages). */
  reconcileOwned(storeOwned: readonly string[]): Promise<void> {
    return this.fleetSide.reconcileOwned(storeOwned);
  }

  /** Test seam of a crash: every timer here stops and nothing is written to the store. */
  halt(): Promise<void> {
    return this.fleetSide.halt();
  }

  /** What ./session-fleet.ts uses of this lifecycle. */
  private hostForFleet(): SessionHost {
    return {
      replicaId: this.replicaId,
      reasons: this.reasons,
      schemas: this.schemas,
      live: this.live,
      creating: this.creating,
      isClosing: () => this.closing,
      close: () => void (this.closing = true),
      own: (streamId, apiKey) => void this.owned.set(streamId, apiKey),
      disown: (streamId) => (streamId === undefined ? this.owned.clear() : void this.owned.delete(streamId)),
      track: (session) => this.track(session),
      stopLocal: (session) => this.stopLocal(session),
      end: (streamId, reason) => this.end(streamId, reason),
      openKey: (rec) => this.openKey(rec),
      timers: this.timers,
    };
  }

  /** Stops a stream's scheduler, timers and media here, touching nothing in the store. */
  private async stopLocal(session: LiveSession): Promise<void> {
    session.ending = true;
    // Once: a fenced commit, an `ended` message and the reconcile may all ask.
    if (this.live.get(session.streamId) !== session) return;
    this.live.delete(session.streamId);
    this.deps.observer?.ownedSessions?.(this.live.size);
    session.ticker?.stop();
    session.leaseTimer?.clear();
    session.upstreamKeepalive?.clear();
    this.clock.clearTimeout(session.firstFramePoll);
    session.abort.abort();
    try {
      await this.deps.media?.stop(session.streamId);
    } catch (err) {
      this.deps.logger.warn({ err, streamId: session.streamId }, 'media relay did not stop cleanly');
    }
  }

  private track(session: LiveSession): void {
    this.live.set(session.streamId, session);
    this.deps.observer?.ownedSessions?.(this.live.size);
  }

  /** The client's key from a record (sealed by whichever replica created the stream). */
  private openKey(rec: SessionRecord): string | undefined {
    const local = this.live.get(rec.streamId)?.apiKey ?? this.owned.get(rec.streamId);
    if (local) return local;
    return rec.sealedKey ? this.deps.fleet?.sealer?.open(rec.sealedKey, rec.streamId) : undefined;
  }

  /** Upstream failures → the legacy status and body a client expects (one mapping: ./upstream-errors). */
  mapUpstreamError(err: unknown, ctx: UpstreamCallContext): Error {
    if (err instanceof UpstreamError) this.deps.observer?.upstreamError?.(err.status);
    return toLegacyError(err, ctx, this.deps.logger);
  }
}

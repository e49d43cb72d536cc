import { randomUUID } from 'node:crypto';
import type { ValidateFunction } from 'ajv';
import { JsonSchemaValidators } from '../../lib/json-schema';
import { keyHash } from '../../lib/keys';
import { realClock, setLongInterval, setLongTimeout } from '../../lib/timers';
import type { Clock } from '../../lib/timers';
import { UpstreamError, isUpstreamCode, isUpstreamStatus } from '../../upstream/client';
import type { CallOptions } from '../../upstream/client';
import { newTraceId } from '../../upstream/trace';
import type { SessionRecord, TickCommit } from '../store/store';
import { accessError, streamAccess } from './access';
import { LEGACY_ERRORS } from './errors';
import { TickInference } from './inference';
import { compileOutputSchema } from './output-schema';
import { endEnvelope, resultsChannel } from './results-socket';
import { recordOf, resumePoint } from './ownership';
import { SOLO_REPLICA } from './session-ports';
import type { CreateInput, CreateOutput, LiveSession, OwnerMessage, SessionDeps } from './session-ports';
import { Ticker } from './ticker';
import type { LegacyMedia, SessionSpec } from './translate';
import { legacyEndReasons, legacyRoomToken, legacyThreadId, microcentsToCents, transportLostReason } from './translate';
import { UPSTREAM_CONTEXTS, toLegacyError } from './upstream-errors';
import type { UpstreamCallContext } from './upstream-errors';

/** How soon a lease check that could not read the store asks again. */
const LEASE_RETRY_MS = 1000;

/**
 * Legacy sessions: create (slot → upstream stream → record → scheduler), leases, keepalives,
 * inference ticks, and the one end path every exit goes through, on any replica of a fleet. This
 * replica schedules the streams it owns (`live`); the store's record is the truth for the rest.
 * The fleet side (adopt, hand over, owner messages, reconcile) is driven by ../fleet.
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
  /** Streams being adopted right now (an adopt message and the reconcile may both ask). */
  private readonly adopting = new Set<string>();
  private readonly reRegistering = new Set<string>();
  /** Streams whose record is being written by their create (the owned-streams reconcile leaves them be). */
  private readonly creating = new Set<string>();
  /** Output-schema validators, cached by content (streams re-sending one schema compile it once). */
  readonly schemas: JsonSchemaValidators;
  private readonly clock: Clock;
  private readonly inference: TickInference;

  constructor(private readonly deps: SessionDeps) {
    this.reasons = legacyEndReasons(deps.brand);
    this.schemas = new JsonSchemaValidators({ maxEntries: 256, logger: deps.logger });
    this.clock = deps.clock ?? realClock;
    this.inference = new TickInference(deps, {
      outOfCredits: (session) => void this.end(session.streamId, this.reasons.insufficientCredits),
      upstreamLost: (session, err) => void this.onUpstreamLoss(session, err),
      committed: (session, tick, commit) => this.onCommit(session, tick, commit),
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
    this.armLease(session, session.leaseExpiresAtMs);
    this.armUpstreamKeepalive(session);
    this.waitForFirstFrame(session, cfg.firstFramePollMs);
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
      this.armLease(session, session.leaseExpiresAtMs);
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
      this.tell(next.owner, { op: 'prompt', streamId });
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
    if (before.owner && before.owner !== this.replicaId) this.tell(before.owner, { op: 'ended', streamId, reason });
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

  private armLease(session: LiveSession, expiresAtMs: number): void {
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
        await this.reRegister(session);
        return this.armLease(session, session.leaseExpiresAtMs);
      }
    } else if (rec.state !== 'active' || rec.owner !== this.replicaId) {
      return this.stopLocal(session);
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
    await this.end(session.streamId, this.reasons.leaseExpired);
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
  private async onUpstreamLoss(session: LiveSession, err: unknown): Promise<void> {
    if (session.ending) return;
    if (isUpstreamStatus(err, 402)) return void this.end(session.streamId, this.reasons.insufficientCredits);
    if (isUpstreamStatus(err, 404) || isUpstreamCode(err, 'stream_not_found')) {
      const reason = await this.upstreamEndReason(session);
      return void this.end(session.streamId, reason, { deleteUpstream: false });
    }
    this.deps.logger.warn({ err, streamId: session.streamId }, 'upstream keepalive failed');
  }

  private async upstreamEndReason(session: LiveSession): Promise<string> {
    try {
      const s = await this.deps.upstream.getStream(session.apiKey, session.streamId);
      return s.end_reason === 'deleted' ? this.reasons.clientRequested : this.reasons.leaseExpired;
    } catch {
      return this.reasons.leaseExpired;
    }
  }

  /**
   * Polls (cheaply, backing off) until the upstream reports a first frame, then starts ticking; a
   * clip stream's first tick waits until the stream holds a full clip (frame mode starts at once).
   */
  private waitForFirstFrame(session: LiveSession, delayMs: number): void {
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
      // A self-fenced replica (its heartbeat failing) lets the ticks pass: a successor may own them.
      onTick: async (tick) => (this.selfFenced ? undefined : this.inference.run(session, tick)),
      clock: this.clock,
      onSkip: () => observer?.tickSkipped?.(session.streamId),
      onError: (err) => logger.error({ err, streamId: session.streamId }, 'inference tick failed'),
    });
    session.ticker.start(gridStartMs, firstN);
  }

  // ── Fleet: what the membership loop and the control channel ask of this replica's sessions. ──

  /** Pauses (true) or resumes ticking on every stream here (a replica whose heartbeat fails fences itself). */
  selfFenced = false;

  /** Ids of the streams this replica schedules. */
  get ownedIds(): string[] {
    return [...this.live.keys()];
  }

  /** A tick's commit answer: a new prompt revision is read; a lost stream stops here; a lost record is re-registered. */
  private onCommit(session: LiveSession, tick: number, commit: TickCommit): void {
    if (commit.ok) {
      session.lastTick = Math.max(session.lastTick, tick);
      if (commit.promptRev !== session.promptRev) void this.refreshPrompt(session.streamId);
      return;
    }
    this.deps.observer?.tickFenced?.(commit.reason);
    if (commit.reason === 'duplicate') return;
    if (commit.reason === 'missing') return void this.reRegister(session);
    this.deps.logger.info({ streamId: session.streamId, reason: commit.reason }, 'tick refused by the store: stream owned or ended elsewhere, stopping here');
    void this.stopLocal(session);
  }

  /** Reads the stream's prompt from the store (a PATCH served by another replica). */
  async refreshPrompt(streamId: string): Promise<void> {
    const session = this.live.get(streamId);
    if (!session) return;
    const rec = await this.deps.store.getSession(streamId);
    if (rec?.state === 'active' && rec.owner === this.replicaId && !session.ending) {
      session.prompt = rec.prompt;
      session.promptRev = rec.promptRev;
    }
  }

  /** Writes a lost record back from memory under a new epoch and takes its slot again (the store restarted empty). */
  private async reRegister(session: LiveSession): Promise<void> {
    if (this.reRegistering.has(session.streamId) || session.ending) return;
    this.reRegistering.add(session.streamId);
    const { store, logger, cfg } = this.deps;
    try {
      session.epoch += 1;
      await store.putSession(recordOf(session, this.replicaId, this.clock.now()));
      if (!(await store.acquireSlot(session.keyHash, session.slotId, cfg.maxStreamsPerKey, this.replicaId))) {
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
      const session = this.live.get(msg.streamId);
      if (session) await this.stopLocal(session);
      this.owned.delete(msg.streamId);
      return;
    }
    const rec = await this.deps.store.getSession(msg.streamId);
    if (rec?.state === 'active' && rec.owner === this.replicaId) await this.adopt(rec, 'handover');
  }

  /**
   * Takes over a stream whose record names this replica its owner (after a claim): opens the sealed
   * key, rebuilds the live session from the record, arms its lease and upstream keepalive, re-joins a
   * room source and resumes ticking on the same grid. A pinned (webrtc) stream ends instead: its
   * media relay died with its owner. False when it is already running here.
   */
  async adopt(rec: SessionRecord, how: 'failover' | 'handover'): Promise<boolean> {
    const id = rec.streamId;
    if (this.live.has(id) || this.adopting.has(id) || this.closing) return false;
    this.adopting.add(id);
    const { logger, cfg } = this.deps;
    try {
      if (rec.pinned) {
        await this.end(id, transportLostReason('webrtc', this.deps.brand));
        return false;
      }
      const apiKey = this.openKey(rec);
      if (!apiKey) {
        logger.error({ streamId: id }, 'cannot open the stream\'s sealed key (is GATEWAY_SECRET the same on every replica?): ending it');
        await this.end(id, this.reasons.serverShutdown);
        return false;
      }
      const spec = rec.spec as SessionSpec;
      let validate: ValidateFunction | undefined;
      try {
        validate = spec.outputSchema ? compileOutputSchema(this.schemas, spec.outputSchema) : undefined;
      } catch (err) {
        logger.warn({ err, streamId: id }, 'adopted stream\'s output schema does not compile here; results go unchecked');
      }
      const session: LiveSession = {
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
      this.track(session);
      this.owned.set(id, apiKey);
      this.armLease(session, rec.leaseExpiresAtMs);
      this.armUpstreamKeepalive(session);
      if (spec.transport === 'room') await this.rejoinRoom(session);
      if (session.ending) return false;
      if (rec.gridStartMs === null) this.waitForFirstFrame(session, cfg.firstFramePollMs);
      else {
        const at = resumePoint(rec, spec.intervalMs, this.clock.now());
        this.startTicker(session, at.gridStartMs, at.n);
      }
      this.deps.observer?.sessionAdopted?.(id, how);
      logger.info({ streamId: id, how, epoch: rec.epoch, key: rec.keyHash }, 'legacy stream adopted');
      return true;
    } finally {
      this.adopting.delete(id);
    }
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
        onLost: () => void this.end(session.streamId, transportLostReason('room', brand)),
      });
    } catch (err) {
      logger.warn({ err, streamId: session.streamId }, 'could not re-join the room source');
      await this.end(session.streamId, transportLostReason('room', brand));
    }
  }

  /**
   * Drain: hands every stream here to `targetOf(streamId)` (claim under this replica's epoch, then
   * `adopt` on the target's control channel), after stopping its ticks here. Pinned streams end as
   * at any shutdown. Returns how many were handed over.
   */
  async handOver(targetOf: (streamId: string) => string | undefined): Promise<number> {
    this.closing = true;
    const { store, logger } = this.deps;
    let moved = 0;
    await Promise.all(
      [...this.live.values()].map(async (session) => {
        const target = targetOf(session.streamId);
        if (session.pinned || !target) return void (await this.end(session.streamId, this.reasons.serverShutdown));
        await this.stopLocal(session);
        this.owned.delete(session.streamId);
        const claimed = await store.claimSession(session.streamId, { owner: this.replicaId, epoch: session.epoch }, target);
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
    const owned = new Set(storeOwned);
    for (const id of owned) {
      if (this.live.has(id) || this.creating.has(id)) continue;
      const rec = await store.getSession(id);
      if (rec?.state === 'active' && rec.owner === this.replicaId) await this.adopt(rec, 'handover');
    }
    for (const session of [...this.live.values()]) {
      if (owned.has(session.streamId) || session.ending || this.creating.has(session.streamId)) continue;
      const rec = await store.getSession(session.streamId);
      if (!rec) await this.reRegister(session);
      else if (rec.state !== 'active' || rec.owner !== this.replicaId) await this.stopLocal(session);
    }
  }

  /** Test seam of a crash: every timer here stops and nothing is written to the store (the fleet's view of a dead replica). */
  async halt(): Promise<void> {
    this.closing = true;
    await Promise.all([...this.live.values()].map((s) => this.stopLocal(s)));
    this.owned.clear();
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

  /** Fire and forget: a lost control message is caught by the tick commit and the periodic reconcile. */
  private tell(replica: string, msg: OwnerMessage): void {
    this.deps.fleet?.tell(replica, msg).catch((err: unknown) => this.deps.logger.warn({ err, replica, op: msg.op }, 'control message not sent'));
  }

  /** Upstream failures → the legacy status and body a client expects (one mapping: ./upstream-errors). */
  mapUpstreamError(err: unknown, ctx: UpstreamCallContext): Error {
    if (err instanceof UpstreamError) this.deps.observer?.upstreamError?.(err.status);
    return toLegacyError(err, ctx, this.deps.logger);
  }
}

import { randomUUID } from 'node:crypto';
import type { ValidateFunction } from 'ajv';
import { JsonSchemaValidators } from '../../lib/json-schema';
import { keyHash } from '../../lib/keys';
import { realClock, setLongInterval, setLongTimeout } from '../../lib/timers';
import type { Clock } from '../../lib/timers';
import { UpstreamError, isUpstreamCode, isUpstreamStatus } from '../../upstream/client';
import type { CallOptions } from '../../upstream/client';
import { newTraceId } from '../../upstream/trace';
import { FLEET_DEFAULTS } from '../store/store';
import type { SessionRecord } from '../store/store';
import { accessError, streamAccess } from './access';
import { LEGACY_ERRORS } from './errors';
import { TickInference } from './inference';
import { compileOutputSchema } from './output-schema';
import { endEnvelope, resultsChannel } from './results-socket';
import type { CreateInput, CreateOutput, LiveSession, SessionDeps } from './session-ports';
import { Ticker } from './ticker';
import type { LegacyMedia, SessionSpec } from './translate';
import { legacyEndReasons, legacyRoomToken, legacyThreadId, microcentsToCents, transportLostReason } from './translate';
import { UPSTREAM_CONTEXTS, toLegacyError } from './upstream-errors';
import type { UpstreamCallContext } from './upstream-errors';


/**
 * Legacy sessions: create (slot → upstream stream → scheduler), leases, keepalives, inference ticks,
 * and the one idempotent end path every exit goes through.
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
    });
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
    if (!(await store.acquireSlot(kh, slotId, cfg.maxStreamsPerKey))) {
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
      costMicrocents: 0,
      lastKeepaliveAtMs: now,
      ending: false,
    };
    this.live.set(created.id, session);
    const record: SessionRecord = {
      streamId: created.id,
      keyHash: kh,
      slotId,
      accountId: input.accountId,
      state: 'active',
      endReason: null,
      createdAtMs: now,
      endedAtMs: null,
      leaseExpiresAtMs: now + this.leaseMs,
      prompt: input.spec.prompt,
      promptUpdatedAtMs: now,
      spec: input.spec,
      ...FLEET_DEFAULTS,
      lastKeepaliveAtMs: now,
      fallbackModels: [...fallbackModels],
      ids: session.ids,
    };
    await store.putSession(record);

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
    this.armLease(session, record.leaseExpiresAtMs);
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

  /** Legacy keepalive: renews the legacy lease and reports credits, cost and state. */
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
      await this.end(streamId, this.reasons.insufficientCredits);
      throw LEGACY_ERRORS.insufficientCredits();
    }
    const now = this.clock.now();
    const leaseExpiresAtMs = now + this.leaseMs;
    await store.updateSession(streamId, { leaseExpiresAtMs });
    const session = this.live.get(streamId);
    let upstreamStream;
    try {
      // The upstream keepalive also hands out a fresh publish token.
      const ka = await upstream.keepalive(apiKey, streamId, ids);
      if (session) {
        session.publishToken = ka.publish.token;
        this.deps.media?.renewToken?.(streamId, ka.publish.token);
      }
      upstreamStream = await upstream.getStream(apiKey, streamId, ids);
    } catch (err) {
      if (isUpstreamStatus(err, 404)) {
        await this.end(streamId, this.reasons.leaseExpired);
        throw LEGACY_ERRORS.streamEndedUpstream(streamId);
      }
      throw this.mapUpstreamError(err, UPSTREAM_CONTEXTS.keepalive);
    }
    const cost = session?.costMicrocents ?? 0;
    const since = session?.lastKeepaliveAtMs ?? rec.createdAtMs;
    if (session) {
      session.costMicrocents = 0;
      session.lastKeepaliveAtMs = now;
      this.armLease(session, leaseExpiresAtMs);
    }
    return {
      streamId,
      ttlSeconds: cfg.leaseTtlSeconds,
      creditsRemainingCents: balance.balance_cents,
      costCents: microcentsToCents(cost),
      secondsCharged: Math.max(0, Math.round((now - since) / 1000)),
      lastFrameAtMs: upstreamStream.last_frame_at_ms,
      roomToken: legacyRoomToken(rec.spec as SessionSpec | undefined, session?.publishToken),
    };
  }

  async updatePrompt(streamId: string, accountId: string, prompt: string): Promise<SessionRecord> {
    const rec = await this.recordFor(streamId, accountId);
    if (rec.state === 'ended') throw LEGACY_ERRORS.streamEnded(streamId);
    const session = this.live.get(streamId);
    if (session) session.prompt = prompt;
    return (await this.deps.store.updateSession(streamId, { prompt, promptUpdatedAtMs: this.clock.now() }))!;
  }

  /**
   * The one end path: stop the scheduler and media, release the slot, close sockets with 1001 and
   * the reason, delete the upstream stream, keep a tombstone. Idempotent.
   */
  async end(streamId: string, reason: string, opts: { deleteUpstream?: boolean } = {}): Promise<boolean> {
    const { store, logger, cfg } = this.deps;
    const session = this.live.get(streamId);
    if (!session || session.ending) return false;
    session.ending = true;
    this.live.delete(streamId);
    session.ticker?.stop();
    session.leaseTimer?.clear();
    session.upstreamKeepalive?.clear();
    this.clock.clearTimeout(session.firstFramePoll);
    session.abort.abort();
    try {
      await this.deps.media?.stop(streamId);
    } catch (err) {
      logger.warn({ err, streamId }, 'media relay did not stop cleanly');
    }
    await store.updateSession(streamId, { state: 'ended', endReason: reason, endedAtMs: this.clock.now() });
    await store.expireSession(streamId, cfg.tombstoneSeconds * 1000);
    await store.releaseSlot(session.keyHash, session.slotId);
    await store.publish(resultsChannel(streamId), endEnvelope(reason));
    this.deps.observer?.streamEnded?.(session.keyHash, reason);
    logger.info({ streamId, reason, key: session.keyHash }, 'legacy stream ended');
    if (opts.deleteUpstream !== false) await this.deleteUpstream(session.apiKey, streamId, session.ids);
    else this.owned.delete(streamId);
    return true;
  }

  /** Deletes an upstream stream (the client retries with backoff); a failure leaves it owned for `closeAll`. */
  private async deleteUpstream(apiKey: string, streamId: string, opts: CallOptions = {}): Promise<void> {
    try {
      await this.deps.upstream.deleteStream(apiKey, streamId, opts);
      this.owned.delete(streamId);
    } catch (err) {
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

  /** The store's lease is the truth (a keepalive may have landed on another replica). */
  private async checkLease(session: LiveSession): Promise<void> {
    if (session.ending) return;
    const rec = await this.deps.store.getSession(session.streamId);
    if (rec && rec.state === 'active' && rec.leaseExpiresAtMs > this.clock.now()) {
      this.armLease(session, rec.leaseExpiresAtMs);
      return;
    }
    await this.end(session.streamId, this.reasons.leaseExpired);
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

  private startTicker(session: LiveSession, firstAtMs: number): void {
    const { cfg, observer, logger } = this.deps;
    session.ticker = new Ticker({
      periodMs: session.spec.intervalMs,
      maxInFlight: cfg.maxInFlight,
      onTick: (tick) => this.inference.run(session, tick),
      clock: this.clock,
      onSkip: () => observer?.tickSkipped?.(session.streamId),
      onError: (err) => logger.error({ err, streamId: session.streamId }, 'inference tick failed'),
    });
    session.ticker.start(firstAtMs);
  }

  /** Upstream failures → the legacy status and body a client expects (one mapping: ./upstream-errors). */
  mapUpstreamError(err: unknown, ctx: UpstreamCallContext): Error {
    if (err instanceof UpstreamError) this.deps.observer?.upstreamError?.(err.status);
    return toLegacyError(err, ctx, this.deps.logger);
  }
}

import { randomUUID } from 'node:crypto';
import { JsonSchemaValidators } from '../../../lib/json-schema';
import { keyHash } from '../../../lib/keys';
import type { Logger } from '../../../lib/logger';
import { ATTR, inSpan, linkTo, newTraceId } from '../../../lib/spans';
import type { Span } from '../../../lib/spans';
import { realClock } from '../../../lib/timers';
import { UpstreamError, isUpstreamStatus } from '../../../upstream/client';
import { LEGACY_ERRORS } from '../contract/errors';
import { TickInference } from './inference';
import { StreamEnd, tellOwner } from './end';
import type { EndOptions } from './end';
import { keepaliveLease, leaseFrom, secondsToSoonestLapse } from './lease';
import { StreamMedia } from './media';
import { StreamMoves } from './moves';
import { legacyRecord, streamAccess } from './ownership';
import type { CreateInput, CreateOutput, LegacyRecord, StreamsContext, StreamsDeps } from './ports';
import { RecordSync } from './record-sync';
import { StreamRegistry } from './registry';
import { nativeOnlySources } from './sources';
import { buildStreamRecord } from './stream-record';
import { StreamStart } from './stream-start';
import { StreamTimers } from './timers';
import type { LegacyEndReasons } from '../contract/closes';
import { legacyEndReasons } from '../contract/closes';
import { legacyRoomToken, microcentsToCents } from '../contract/responses';
import { UPSTREAM_CONTEXTS, toLegacyError } from '../contract/upstream-errors';
import type { UpstreamCallContext } from '../contract/upstream-errors';

/**
 * Legacy streams: create (slot → upstream stream → record → scheduler), keepalives, prompt, on any
 * replica of a fleet. Builds the parts once, in order, each given what it calls: the registry of
 * this process's streams (./registry.ts, each stream a ./live-stream.ts), the end path (./end.ts),
 * the record upkeep (./record-sync.ts), inference (./inference.ts), the timers (./timers.ts), the
 * start-up path a create and an adoption share (./stream-start.ts), and the moves between replicas
 * (./moves.ts, handed to ../../fleet as `moves`).
 */
export class LegacyStreams {
  /** The legacy end reasons (close reasons of 1001), vendor-named where the vendor shows. */
  readonly reasons: LegacyEndReasons;
  /** Output-schema validators, cached by content (streams re-sending one schema compile it once). */
  readonly schemas: JsonSchemaValidators;
  /** What ../../fleet drives: adopt, hand over, owner messages, reconcile, self-fencing. */
  readonly moves: StreamMoves;
  /** This replica's id: the owner written into the records of the streams it schedules. */
  readonly replicaId: string;
  private readonly deps: StreamsContext;
  private readonly registry: StreamRegistry;
  private readonly ender: StreamEnd;
  private readonly timers: StreamTimers;
  private readonly sync: RecordSync;
  private readonly media: StreamMedia;
  private readonly starter: StreamStart;

  constructor(deps: StreamsDeps) {
    const ctx: StreamsContext = {
      ...deps,
      clock: deps.clock ?? realClock,
      replicaId: deps.fleet.replicaId,
      sources: deps.sources ?? nativeOnlySources(),
    };
    this.deps = ctx;
    this.replicaId = ctx.replicaId;
    this.reasons = legacyEndReasons(deps.brand);
    this.schemas = new JsonSchemaValidators({ maxEntries: 256, logger: deps.logger });
    const registry = (this.registry = new StreamRegistry({ logger: deps.logger, sources: ctx.sources, observer: deps.observer }));
    const ender = (this.ender = new StreamEnd(ctx, registry, this.reasons));
    const sync = (this.sync = new RecordSync(ctx, registry));
    this.media = new StreamMedia(ctx, (id, reason) => ender.end(id, reason), sync);
    const inference = new TickInference(ctx, ender, sync);
    const timers = (this.timers = new StreamTimers(ctx, ender, registry, sync, inference));
    const starter = (this.starter = new StreamStart(ctx, registry, ender, timers, this.schemas, this.media));
    this.moves = new StreamMoves(ctx, registry, ender, sync, starter);
  }

  /** Streams this replica schedules. */
  get activeCount(): number {
    return this.registry.size;
  }

  /**
   * Seconds until the soonest lease of the key's live streams lapses if not renewed (the 429's
   * retry-after), undefined when none is known (creates in flight) or the store cannot say: the
   * refusal must not fail on its hint.
   */
  private async soonestLeaseLapse(kh: string): Promise<number | undefined> {
    try {
      const holders = await this.deps.store.slotHolders(kh);
      const records = await Promise.all(holders.map((h) => (h.streamId ? this.deps.store.getRecord(h.streamId) : undefined)));
      const leases = records.filter((r) => r?.state === 'active').map((r) => r!.leaseExpiresAtMs);
      return secondsToSoonestLapse(leases, this.deps.clock.now());
    } catch {
      return undefined;
    }
  }

  /** The upstream's model ids (the default fallback list), upstream failures mapped. */
  private async modelIds(): Promise<string[]> {
    try {
      return await this.deps.catalog.modelIds();
    } catch (err) {
      throw this.mapUpstreamError(err, UPSTREAM_CONTEXTS.models);
    }
  }

  /**
   * Creates a legacy stream. Throws legacy ServiceErrors (429, 401/402/403, 503, 502). Traced as
   * `legacy.create` (its slot, upstream create and record as children); the record keeps the span's
   * ids so every later span of the stream links to it.
   */
  create(input: CreateInput): Promise<CreateOutput> {
    const { spec } = input;
    const attributes = {
      [ATTR.keyHash]: keyHash(input.apiKey),
      [ATTR.mode]: spec.mode,
      [ATTR.transport]: spec.transport,
      [ATTR.model]: spec.model,
    };
    return inSpan('legacy.create', { attributes }, (span) => this.createIn(input, span));
  }

  private async createIn(input: CreateInput, span: Span | undefined): Promise<CreateOutput> {
    const { cfg, store, upstream, clock, logger } = this.deps;
    const { registry, ender } = this;
    const { spec, apiKey } = input;
    // From the drain on, no new streams here (503 `shutting_down`); the ones here go on or move.
    if (!this.deps.lifecycle.takesStreams) throw LEGACY_ERRORS.shuttingDown();
    const source = this.deps.sources.of(spec.transport);
    source.check(spec);
    // Before the slot and the upstream stream: a models failure here must leave nothing behind.
    const fallbackModels = (cfg.fallbackModels ?? (await this.modelIds())).filter((m) => m !== spec.model);
    const kh = keyHash(apiKey);
    const slotId = randomUUID();
    if (!(await store.acquireSlot(kh, slotId, cfg.maxStreamsPerKey, this.replicaId))) {
      throw LEGACY_ERRORS.concurrentStreamLimit(cfg.maxStreamsPerKey, await this.soonestLeaseLapse(kh));
    }
    const undo = new Undo(logger);
    undo.add(() => store.releaseSlot(kh, slotId));
    const traced = span?.spanContext();
    const ids = traced
      ? { requestId: input.requestId, traceId: traced.traceId, spanId: traced.spanId }
      : { requestId: input.requestId, traceId: input.traceId ?? newTraceId() };
    let created;
    try {
      // Not given the client's signal: an aborted create may still have created a stream, and only
      // its answer tells us which one to delete.
      created = await upstream.createStream(apiKey, ids);
    } catch (err) {
      await undo.run();
      throw this.mapUpstreamError(err, UPSTREAM_CONTEXTS.create);
    }
    const streamId = created.id;
    span?.setAttribute(ATTR.streamId, streamId);
    registry.own(streamId, apiKey);
    undo.add(() => ender.deleteUpstream(apiKey, streamId, ids));
    if (input.signal?.aborted) {
      // The client gave up while the upstream was creating: nobody will use or delete this stream.
      await undo.run();
      throw LEGACY_ERRORS.clientClosedRequest();
    }
    const now = clock.now();
    const record: LegacyRecord = buildStreamRecord({
      streamId,
      keyHash: kh,
      slotId,
      accountId: input.accountId,
      nowMs: now,
      leaseExpiresAtMs: leaseFrom(cfg, now),
      prompt: spec.prompt,
      spec,
      owner: this.replicaId,
      // A source whose media lives in this process (the webrtc relay): the stream cannot outlive it elsewhere.
      pinned: !source.movable,
      sealedKey: this.deps.fleet.sealer?.seal(apiKey, streamId) ?? '',
      fallbackModels,
      ids,
      upstreamLeaseSeconds: created.ttl_seconds,
    });
    const media = await this.starter.start(record, apiKey, {
      from: 'create',
      created,
      abandon: () => undo.run(),
      persist: async (stream) => {
        await store.putRecord(stream.toRecord(this.replicaId, now));
        // Bound after the record exists: the reconciler frees a bound slot whose record is gone or ended.
        await store.bindSlot(kh, slotId, streamId);
      },
    });
    this.deps.observer?.streamCreated?.(kh, spec);
    return { streamId, ttlSeconds: cfg.leaseTtlSeconds, media };
  }

  /** A stream record for a caller: 404 when unknown or another account's (the same answer). */
  async recordFor(streamId: string, accountId: string): Promise<LegacyRecord> {
    const access = streamAccess(await this.deps.store.getRecord(streamId), accountId);
    if (!access.ok) throw LEGACY_ERRORS.streamNotFound(streamId);
    return legacyRecord(access.record);
  }

  /**
   * Legacy keepalive, on any replica: renews the lease in the store and reports the cost since the
   * previous keepalive (the store's counter, whichever replica served that one), credits and state.
   */
  keepalive(streamId: string, apiKey: string, accountId: string, ids: { requestId?: string; traceId?: string } = {}) {
    const attributes = { [ATTR.streamId]: streamId, [ATTR.keyHash]: keyHash(apiKey) };
    return inSpan('legacy.keepalive', { attributes }, (span) => this.keepaliveIn(streamId, apiKey, accountId, ids, span));
  }

  private async keepaliveIn(
    streamId: string,
    apiKey: string,
    accountId: string,
    ids: { requestId?: string; traceId?: string },
    span: Span | undefined,
  ) {
    const { store, upstream, cfg } = this.deps;
    const rec = await this.recordFor(streamId, accountId);
    span?.addLinks(linkTo(rec.ids));
    if (rec.state === 'ended') {
      throw LEGACY_ERRORS.streamEnded(streamId, rec.endReason ?? 'ended');
    }
    const balance = await upstream.balance(apiKey, ids).catch((err: unknown) => {
      throw this.mapUpstreamError(err, UPSTREAM_CONTEXTS.balance);
    });
    const now = this.deps.clock.now();
    const lease = keepaliveLease(cfg, now, balance.balance_microcents);
    if (!lease.renewed) {
      await store.updateRecord(streamId, { creditsRefusedAtMs: lease.creditsRefusedAtMs });
      throw LEGACY_ERRORS.insufficientCredits();
    }
    // Renewed before the upstream calls, as the service did: a slow upstream must not lapse the lease.
    const { leaseExpiresAtMs } = lease;
    const renewed = await store.renewLease(streamId, leaseExpiresAtMs, now);
    if (!renewed) {
      const after = await store.getRecord(streamId);
      throw LEGACY_ERRORS.streamEnded(streamId, after?.endReason ?? 'ended');
    }
    if (rec.creditsRefusedAtMs != null) await store.updateRecord(streamId, { creditsRefusedAtMs: null });
    // A Redis failover may have lost the write that took the stream's slot: it counts again from here.
    if (await store.restoreSlot(rec.keyHash, rec.slotId, streamId, rec.owner ?? this.replicaId)) {
      this.deps.logger.warn({ streamId, key: rec.keyHash }, "the stream's slot was missing in the store: restored at its keepalive");
    }
    let ka;
    let upstreamStream;
    try {
      // The upstream keepalive also hands out a fresh publish token.
      ka = await upstream.keepalive(apiKey, streamId, ids);
      upstreamStream = await upstream.getStream(apiKey, streamId, ids);
    } catch (err) {
      if (isUpstreamStatus(err, 404)) {
        await this.end(streamId, await this.ender.upstreamEndReason(apiKey, streamId), { apiKey });
        throw LEGACY_ERRORS.streamEndedUpstream(streamId);
      }
      throw this.mapUpstreamError(err, UPSTREAM_CONTEXTS.keepalive);
    }
    const stream = this.registry.get(streamId);
    if (stream) {
      stream.renewToken(ka.publish.token);
      stream.extendLease(leaseExpiresAtMs);
      this.timers.armLease(stream, stream.record.leaseExpiresAtMs);
    }
    await this.media.tokenRenewed(rec, ka.publish.token);
    return {
      streamId,
      ttlSeconds: cfg.leaseTtlSeconds,
      creditsRemainingCents: balance.balance_cents,
      costCents: microcentsToCents(renewed.costMicrocents),
      secondsCharged: Math.max(0, Math.round((now - renewed.sinceMs) / 1000)),
      lastFrameAtMs: upstreamStream.last_frame_at_ms,
      roomToken: legacyRoomToken(rec.spec, ka.publish.token),
    };
  }

  /** Prompt PATCH, on any replica: the store takes it; the owner's next tick uses it (told, or noticed at commit). */
  async updatePrompt(streamId: string, accountId: string, prompt: string): Promise<LegacyRecord> {
    const rec = await this.recordFor(streamId, accountId);
    if (rec.state === 'ended') throw LEGACY_ERRORS.streamEnded(streamId);
    const next = await this.deps.store.setPrompt(streamId, prompt, this.deps.clock.now());
    if (!next) throw LEGACY_ERRORS.streamEnded(streamId);
    const stream = this.registry.get(streamId);
    if (stream) {
      stream.adoptPrompt(next.prompt, next.promptRev);
    } else if (next.owner && next.owner !== this.replicaId) {
      tellOwner(this.deps, next.owner, { op: 'prompt', streamId });
    }
    return legacyRecord(next);
  }

  /** The one end path, on any replica (./end.ts). Idempotent; true only for the winner. */
  end(streamId: string, reason: string, opts?: EndOptions): Promise<boolean> {
    return this.ender.end(streamId, reason, opts);
  }

  /** Upstream streams created here and not yet deleted (ids). */
  get undeletedUpstreamStreams(): string[] {
    return this.registry.ownedStreams().map(([id]) => id);
  }

  /**
   * Ends every live stream, then deletes the upstream streams this process still owns (a failed
   * delete, an abandoned create) whose record is ended or gone: an active stream is its owner's,
   * never deleted from here, whatever this process remembers (shutdown: the replica is `leaving`,
   * so no create finishes and no adoption starts meanwhile). Returns the ids it ended.
   */
  async closeAll(reason: string = this.reasons.serverShutdown): Promise<string[]> {
    const ids = this.registry.ids();
    const ended = await Promise.all(ids.map((id) => this.end(id, reason)));
    await Promise.all(this.registry.ownedStreams().map(([id, key]) => this.deleteLeftover(id, key)));
    return ids.filter((_, i) => ended[i]);
  }

  private async deleteLeftover(streamId: string, apiKey: string): Promise<void> {
    let rec;
    try {
      rec = await this.deps.store.getRecord(streamId);
    } catch (err) {
      // Unknown owner: left to its upstream lease rather than risk deleting another replica's stream.
      this.deps.logger.warn({ err, streamId }, "shutdown could not read the stream's record: not deleting it upstream");
      return;
    }
    if (rec?.state === 'active') {
      this.registry.forget(streamId);
      this.deps.logger.warn({ streamId, owner: rec.owner }, 'shutdown left an active stream to its owner');
      return;
    }
    await this.ender.deleteUpstream(apiKey, streamId);
  }

  /** Upstream failures → the legacy status and body a client expects (one mapping: ./upstream-errors). */
  mapUpstreamError(err: unknown, ctx: UpstreamCallContext): Error {
    if (err instanceof UpstreamError) this.deps.observer?.upstreamError?.(err.status);
    return toLegacyError(err, ctx, this.deps.logger);
  }
}

/**
 * What a failed create gives back, in the order it was taken: the slot first (the client's quota
 * is free at once), then the upstream stream (its delete may retry). A step that fails is logged
 * and the rest still run; the create's own error is what the caller sees.
 */
class Undo {
  private readonly steps: (() => Promise<unknown>)[] = [];

  constructor(private readonly logger: Logger) {}

  add(step: () => Promise<unknown>): void {
    this.steps.push(step);
  }

  async run(): Promise<void> {
    for (const step of this.steps.splice(0)) {
      await step().catch((err: unknown) => this.logger.warn({ err }, 'undoing a failed create: a step failed'));
    }
  }
}

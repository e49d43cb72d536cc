/**
 * The one start-up path of a stream here, for a create and an adoption alike: its output schema
 * compiled, the `LiveStream` built and registered, its media started (create) or taken over
 * (adoption), and every timer of it armed (`STREAM_TIMERS`: the lease check, the upstream
 * keepalive, its ticks). A create and an adoption differ only in the `StreamOrigin` they pass, so a
 * timer armed here runs after a failover too. The stream's phase moves here: `creating` until its
 * record is written, `adopting` until its media is taken over, then `live` (`LiveStream.phase`).
 */
import type { ValidateFunction } from 'ajv';
import type { JsonSchemaValidators } from '../../../lib/json-schema';
import { detached } from '../../../lib/spans';
import type { StreamRecord } from '../../store/store';
import { LEGACY_ERRORS } from '../contract/errors';
import { compileOutputSchema } from '../contract/output-schema';
import type { LegacyMedia } from '../contract/responses';
import type { StreamEnd } from './end';
import { LiveStream } from './live-stream';
import type { StreamMedia } from './media';
import type { LegacyRecord, StreamsContext } from './ports';
import type { StreamRegistry } from './registry';
import type { StreamTimers } from './timers';

/** A new stream: the upstream create's answer, what writes its record, and what undoes the create. */
export interface CreateOrigin {
  from: 'create';
  /** Where and with which token its media publishes, and the upstream lease's length. */
  created: { publish: { url: string; token: string }; ttl_seconds?: number };
  /** Undoes the create (slot, upstream stream) when it fails before its stream's record is written. */
  abandon(): Promise<void>;
  /** Writes the stream's record and binds its slot. */
  persist(stream: LiveStream): Promise<void>;
}

/** A stream taken over from its record (failover or hand-over): its lease, and its grid (null: no first frame yet). */
export interface AdoptOrigin {
  from: 'adopt';
  rec: StreamRecord;
}

export type StreamOrigin = CreateOrigin | AdoptOrigin;

export class StreamStart {
  constructor(
    private readonly deps: StreamsContext,
    private readonly registry: StreamRegistry,
    private readonly ender: StreamEnd,
    private readonly timers: StreamTimers,
    /** Output-schema validators, cached by content. */
    private readonly schemas: JsonSchemaValidators,
    private readonly media: StreamMedia,
  ) {}

  /**
   * Starts the stream of `record` here. A create answers its media; it throws a schema that does not
   * compile (422) and a store failure, both after `abandon`, a media failure (the stream ended) and
   * a shutdown begun meanwhile (503, the stream ended). An adoption answers
   * whether it runs here: false when its media was lost (its source ended it) or it stopped meanwhile.
   */
  start(record: LegacyRecord, apiKey: string, origin: CreateOrigin): Promise<LegacyMedia>;
  start(record: LegacyRecord, apiKey: string, origin: AdoptOrigin): Promise<boolean>;
  async start(record: LegacyRecord, apiKey: string, origin: StreamOrigin): Promise<LegacyMedia | boolean> {
    const { registry } = this;
    let validate: ValidateFunction | undefined;
    try {
      validate = this.validatorOf(record, origin);
    } catch (err) {
      if (origin.from === 'create') await origin.abandon();
      throw err;
    }
    const stream = new LiveStream(record, apiKey, {
      origin: origin.from,
      validate,
      publishToken: origin.from === 'create' ? origin.created.publish.token : '',
      upstreamLeaseSeconds: origin.from === 'create' ? origin.created.ttl_seconds : record.upstreamLeaseSeconds,
      source: this.media.sourceOf({ record }),
      clock: this.deps.clock,
    });
    if (origin.from === 'adopt') {
      registry.add(stream);
      // Renewed at once, while its media is taken over: when its previous owner last renewed is not known here.
      this.armLease(stream, origin);
      if (!(await this.media.adopt(stream)) || stream.stopping) return false;
      this.armTicks(stream, origin);
      stream.started();
      return true;
    }
    registry.add(stream);
    try {
      await origin.persist(stream);
    } catch (err) {
      // The store failed mid-create: leave nothing behind (the slot may stay until the reconciler frees it).
      await registry.stop(stream);
      await origin.abandon();
      throw err;
    }
    stream.started();
    let media: LegacyMedia;
    try {
      media = await this.media.start(stream, origin.created.publish);
    } catch (err) {
      await this.ender.end(stream.id, this.ender.reasons.clientRequested);
      throw err;
    }
    if (!this.deps.lifecycle.startsStreams) {
      // Shutdown began while this create was in flight: do not hand out a stream that is about to end.
      await this.ender.end(stream.id, this.ender.reasons.serverShutdown);
      throw LEGACY_ERRORS.shuttingDown();
    }
    this.armLease(stream, origin);
    this.armTicks(stream, origin);
    return media;
  }

  /**
   * The output schema's validator. Compiled only at the start: an unauthenticated, slot-less or
   * credit-less caller never costs a compile. A create's that does not compile is refused; an
   * adopted one's (compiled again here) goes unchecked.
   */
  private validatorOf(record: LegacyRecord, origin: StreamOrigin): ValidateFunction | undefined {
    const { outputSchema } = record.spec;
    if (!outputSchema) return undefined;
    try {
      return compileOutputSchema(this.schemas, outputSchema);
    } catch (err) {
      if (origin.from === 'create') throw err;
      this.deps.logger.warn(
        { err, streamId: record.streamId },
        "adopted stream's output schema does not compile here; results go unchecked",
      );
      return undefined;
    }
  }

  /**
   * The lease check at the record's lease, and the upstream keepalive (when it first renews:
   * ./lease.ts). Both timer arms run outside the create's or adoption's span: what the timers do
   * later is traced on its own, linked to the create.
   */
  private armLease(stream: LiveStream, origin: StreamOrigin): void {
    detached(() => this.timers.arm(stream, origin.from));
  }

  /** Its ticks: on the record's grid when it has one (an adopted stream past its first frame), else once a first frame arrives. */
  private armTicks(stream: LiveStream, origin: StreamOrigin): void {
    detached(() =>
      origin.from === 'adopt' && origin.rec.gridStartMs !== null
        ? this.timers.resumeTicking(stream, origin.rec)
        : this.timers.waitForFirstFrame(stream),
    );
  }
}

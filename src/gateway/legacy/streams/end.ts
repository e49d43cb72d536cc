/**
 * The one end path of a legacy stream, on any replica, and what leads to it from the upstream (a
 * stream gone or out of credits). Also the deletes of upstream streams this process owns, the
 * client's key of a record, and the fire-and-forget control message to a stream's owner.
 */
import { ATTR, inSpan, linkTo } from '../../../lib/spans';
import type { Span } from '../../../lib/spans';
import { isUpstreamCode, isUpstreamStatus } from '../../../upstream/client';
import type { CallOptions } from '../../../upstream/client';
import type { Stream } from '../../../lib/wire';
import type { StreamRecord } from '../../store/store';
import type { LiveStream } from './live-stream';
import { releaseMedia } from './media';
import type { StreamRegistry } from './registry';
import { encodeEnvelope, resultsChannel } from './results-channel';
import type { OwnerMessage, StreamsContext } from './ports';
import type { LegacyEndReasons } from '../contract/closes';

/** Fire and forget: a lost control message is caught by the tick commit and the periodic reconcile. */
export function tellOwner(deps: Pick<StreamsContext, 'fleet' | 'logger'>, replica: string, msg: OwnerMessage): void {
  deps.fleet.tell(replica, msg).catch((err: unknown) => deps.logger.warn({ err, replica, op: msg.op }, 'control message not sent'));
}

export interface EndOptions {
  /** False: the upstream stream is gone already (nothing to delete). */
  deleteUpstream?: boolean;
  /**
   * The client's key: a client's call asked for the end (a DELETE, a keepalive that found no
   * credits or no upstream stream), so it ends the stream whoever owns it. Without it, an end a
   * replica decides for a stream it runs (lease, upstream loss, credits, transport, shutdown) is
   * fenced by its owner and epoch: a replica that lost the stream ends nothing, it lets go.
   */
  apiKey?: string;
  /**
   * The end is the answer to a client's DELETE: the sockets hear of it last (after the upstream
   * delete), so the DELETE's answer is written before any socket closes (they wait `stopGraceMs`).
   */
  answerFirst?: boolean;
}

export class StreamEnd {
  constructor(
    private readonly deps: StreamsContext,
    private readonly registry: StreamRegistry,
    readonly reasons: LegacyEndReasons,
  ) {}

  /**
   * The one end path, on any replica: the store's `endStream` picks one winner fleet-wide, which
   * releases the slot, keeps a tombstone, closes every socket (1001 + reason, through the results
   * channel), deletes the upstream stream and tells the owner to stop. The owner's local scheduler
   * and media stop wherever it runs. Idempotent; true only for the winner. Traced as `legacy.end`
   * (under the request or tick that ended it, else a trace of its own), linked to the create.
   */
  end(streamId: string, reason: string, opts: EndOptions = {}): Promise<boolean> {
    const stream = this.registry.get(streamId);
    if (stream?.stopping) return Promise.resolve(false);
    const attributes = { [ATTR.streamId]: streamId, [ATTR.endReason]: reason };
    return inSpan('legacy.end', { attributes, link: stream?.record.ids }, (span) => this.endIn(streamId, reason, opts, span));
  }

  private async endIn(streamId: string, reason: string, opts: EndOptions, span: Span | undefined): Promise<boolean> {
    const { store, logger, cfg, clock } = this.deps;
    const stream = this.registry.get(streamId);
    if (stream && !stream.beginEnd()) return false;
    const now = clock.now();
    let before: StreamRecord | undefined;
    const fence = stream && !opts.apiKey ? { owner: this.deps.replicaId, epoch: stream.record.epoch } : undefined;
    try {
      before = await store.endStream(streamId, reason, now, fence);
      // The store lost the record (restarted empty): the owner still cleans up what it holds.
      if (!before && stream && !(await store.getRecord(streamId))) before = stream.toRecord(this.deps.replicaId, now);
    } catch (err) {
      stream?.cancelEnd();
      throw err;
    }
    if (stream) await this.registry.stop(stream);
    if (!before) {
      // Another call or replica ended it first and did the rest, or (fenced) it is another owner's now.
      span?.setAttribute(ATTR.endWon, false);
      this.registry.forget(streamId);
      return false;
    }
    span?.setAttribute(ATTR.endWon, true);
    if (!stream) span?.addLinks(linkTo(before.ids));
    await store.expireRecord(streamId, cfg.tombstoneSeconds * 1000);
    await store.releaseSlot(before.keyHash, before.slotId);
    const announce = () => store.publish(resultsChannel(streamId), encodeEnvelope({ kind: 'end', reason }), streamId);
    if (!opts.answerFirst) await announce();
    this.deps.observer?.streamEnded?.(before.keyHash, reason);
    logger.info({ streamId, reason, key: before.keyHash }, 'legacy stream ended');
    if (before.owner && before.owner !== this.deps.replicaId) tellOwner(this.deps, before.owner, { op: 'ended', streamId, reason });
    // Its media outside this process (a WHIP session) ends before the upstream stream is deleted.
    await releaseMedia(this.deps, before, stream?.publishToken);
    const key = stream?.apiKey ?? opts.apiKey ?? this.openKey(before);
    const ids = stream?.record.ids ?? (before.ids.traceId ? before.ids : {});
    if (opts.deleteUpstream !== false && key) await this.deleteUpstream(key, streamId, ids);
    else this.registry.forget(streamId);
    if (opts.answerFirst) await announce();
    return true;
  }

  /** Deletes an upstream stream (the client retries with backoff); a failure leaves it owned for `closeAll`. */
  async deleteUpstream(apiKey: string, streamId: string, opts: CallOptions = {}): Promise<void> {
    try {
      await this.deps.upstream.deleteStream(apiKey, streamId, opts);
      this.registry.forget(streamId);
    } catch (err) {
      this.registry.own(streamId, apiKey);
      this.deps.logger.warn({ err, streamId }, 'upstream delete failed after retries; retried at shutdown, else its lease expires it');
    }
  }

  /** The client's key from a record (in memory here, else sealed by whichever replica created the stream). */
  openKey(rec: StreamRecord): string | undefined {
    const held = this.registry.keyOf(rec.streamId);
    if (held) return held;
    return rec.sealedKey ? this.deps.fleet.sealer?.open(rec.sealedKey, rec.streamId) : undefined;
  }

  /** Upstream stream gone or unrenewable: end with the reason that matches why. */
  async onUpstreamLoss(stream: LiveStream, err: unknown): Promise<void> {
    if (stream.stopping) return;
    const id = stream.id;
    if (isUpstreamStatus(err, 402)) return void this.end(id, this.reasons.insufficientCredits);
    if (isUpstreamStatus(err, 404) || isUpstreamCode(err, 'stream_not_found')) {
      const reason = await this.upstreamEndReason(stream.apiKey, id);
      return void this.end(id, reason, { deleteUpstream: false });
    }
    this.deps.logger.warn({ err, streamId: id }, 'upstream keepalive failed');
  }

  /**
   * Why the upstream stream is gone: its lease expired there (`lease_expired`), or it was deleted
   * or cannot be read (`upstream_ended`). Never `client_requested`: the client's DELETE ends the
   * record before the upstream stream, so a stream this gateway deleted on request never gets here.
   */
  async upstreamEndReason(apiKey: string, streamId: string): Promise<string> {
    try {
      return this.endReasonOf(await this.deps.upstream.getStream(apiKey, streamId));
    } catch {
      return this.reasons.upstreamEnded;
    }
  }

  /** The end reason of an upstream stream read as ended (see `upstreamEndReason`). */
  private endReasonOf(s: Pick<Stream, 'end_reason'>): string {
    return s.end_reason === 'expired' ? this.reasons.leaseExpired : this.reasons.upstreamEnded;
  }

  /** An upstream stream already read as ended: the stream ends for its reason (nothing to delete there). */
  endedUpstream(stream: LiveStream, s: Pick<Stream, 'end_reason'>): Promise<boolean> {
    return this.end(stream.id, this.endReasonOf(s), { deleteUpstream: false });
  }
}

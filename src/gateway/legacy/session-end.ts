/**
 * The one end path of a legacy stream, on any replica, and what leads to it from the upstream (a
 * stream gone or out of credits). Also the deletes of upstream streams this process owns, the
 * client's key of a record, and the fire-and-forget control message to a stream's owner.
 */
import { isUpstreamCode, isUpstreamStatus } from '../../upstream/client';
import type { CallOptions } from '../../upstream/client';
import type { SessionRecord } from '../store/store';
import type { LocalSessions } from './local-sessions';
import { recordOf } from './ownership';
import { endEnvelope, resultsChannel } from './results-socket';
import type { LiveSession, OwnerMessage, SessionContext, SessionDeps } from './session-ports';
import type { LegacyEndReasons } from './closes';

/** Fire and forget: a lost control message is caught by the tick commit and the periodic reconcile. */
export function tellOwner(deps: Pick<SessionDeps, 'fleet' | 'logger'>, replica: string, msg: OwnerMessage): void {
  deps.fleet?.tell(replica, msg).catch((err: unknown) => deps.logger.warn({ err, replica, op: msg.op }, 'control message not sent'));
}

export interface EndOptions {
  /** False: the upstream stream is gone already (nothing to delete). */
  deleteUpstream?: boolean;
  /** The caller's key, when this replica holds none for the stream. */
  apiKey?: string;
}

export class SessionEnd {
  constructor(
    private readonly deps: SessionContext,
    private readonly local: LocalSessions,
    private readonly replicaId: string,
    readonly reasons: LegacyEndReasons,
  ) {}

  /**
   * The one end path, on any replica: the store's `endSession` picks one winner fleet-wide, which
   * releases the slot, keeps a tombstone, closes every socket (1001 + reason, through the results
   * channel), deletes the upstream stream and tells the owner to stop. The owner's local scheduler
   * and media stop wherever it runs. Idempotent; true only for the winner.
   */
  async end(streamId: string, reason: string, opts: EndOptions = {}): Promise<boolean> {
    const { store, logger, cfg, clock } = this.deps;
    const session = this.local.get(streamId);
    if (session?.runtime.ending) return false;
    if (session) session.runtime.ending = true;
    const now = clock.now();
    let before: SessionRecord | undefined;
    try {
      before = await store.endSession(streamId, reason, now);
      // The store lost the record (restarted empty): the owner still cleans up what it holds.
      if (!before && session && !(await store.getSession(streamId))) before = recordOf(session, this.replicaId, now);
    } catch (err) {
      if (session) session.runtime.ending = false;
      throw err;
    }
    if (session) await this.local.stop(session);
    if (!before) {
      // Another call or replica ended it first and did the rest.
      this.local.forget(streamId);
      return false;
    }
    await store.expireSession(streamId, cfg.tombstoneSeconds * 1000);
    await store.releaseSlot(before.keyHash, before.slotId);
    await store.publish(resultsChannel(streamId), endEnvelope(reason));
    this.deps.observer?.streamEnded?.(before.keyHash, reason);
    logger.info({ streamId, reason, key: before.keyHash }, 'legacy stream ended');
    if (before.owner && before.owner !== this.replicaId) tellOwner(this.deps, before.owner, { op: 'ended', streamId, reason });
    const key = session?.apiKey ?? opts.apiKey ?? this.openKey(before);
    const ids = session?.record.ids ?? (before.ids.traceId ? before.ids : {});
    if (opts.deleteUpstream !== false && key) await this.deleteUpstream(key, streamId, ids);
    else this.local.forget(streamId);
    return true;
  }

  /** Deletes an upstream stream (the client retries with backoff); a failure leaves it owned for `closeAll`. */
  async deleteUpstream(apiKey: string, streamId: string, opts: CallOptions = {}): Promise<void> {
    try {
      await this.deps.upstream.deleteStream(apiKey, streamId, opts);
      this.local.forget(streamId);
    } catch (err) {
      this.local.own(streamId, apiKey);
      this.deps.logger.warn({ err, streamId }, 'upstream delete failed after retries; retried at shutdown, else its lease expires it');
    }
  }

  /** The client's key from a record (in memory here, else sealed by whichever replica created the stream). */
  openKey(rec: SessionRecord): string | undefined {
    const local = this.local.keyOf(rec.streamId);
    if (local) return local;
    return rec.sealedKey ? this.deps.fleet?.sealer?.open(rec.sealedKey, rec.streamId) : undefined;
  }

  /** Upstream stream gone or unrenewable: end with the reason that matches why. */
  async onUpstreamLoss(session: LiveSession, err: unknown): Promise<void> {
    if (session.runtime.ending) return;
    const id = session.record.streamId;
    if (isUpstreamStatus(err, 402)) return void this.end(id, this.reasons.insufficientCredits);
    if (isUpstreamStatus(err, 404) || isUpstreamCode(err, 'stream_not_found')) {
      const reason = await this.upstreamEndReason(session);
      return void this.end(id, reason, { deleteUpstream: false });
    }
    this.deps.logger.warn({ err, streamId: id }, 'upstream keepalive failed');
  }

  private async upstreamEndReason(session: LiveSession): Promise<string> {
    try {
      const s = await this.deps.upstream.getStream(session.apiKey, session.record.streamId);
      return s.end_reason === 'deleted' ? this.reasons.clientRequested : this.reasons.leaseExpired;
    } catch {
      return this.reasons.leaseExpired;
    }
  }
}

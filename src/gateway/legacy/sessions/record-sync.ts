/**
 * Keeps this owner's copy of a record (`LiveSession.record`) and the store's in step: a tick
 * commit's answer (a new prompt revision is read, a lost stream stops here, a lost record is
 * written back), a prompt changed on another replica, a record the store lost.
 */
import type { TickCommit } from '../../store/store';
import type { LocalSessions } from './registry';
import { recordOf } from './ownership';
import type { LiveSession, SessionContext } from './ports';

export class RecordSync {
  private readonly reRegistering = new Set<string>();

  constructor(
    private readonly deps: SessionContext,
    private readonly local: Pick<LocalSessions, 'get' | 'remove'>,
  ) {}

  /** The relay saw a new frame size: kept in the store, where any replica's stream info reads it. */
  frameSize(streamId: string, width: number, height: number): void {
    this.deps.store
      .updateSession(streamId, { frameWidth: width, frameHeight: height })
      .catch((err: unknown) => this.deps.logger.warn({ err, streamId }, 'could not record the frame size'));
  }

  /** A tick's commit answer: a new prompt revision is read; a lost stream stops here; a lost record is re-registered. */
  onCommit(session: LiveSession, tick: number, commit: TickCommit): void {
    const { record } = session;
    if (commit.ok) {
      record.lastTick = Math.max(record.lastTick, tick);
      if (commit.promptRev !== record.promptRev) void this.refreshPrompt(record.streamId);
      return;
    }
    this.deps.observer?.tickFenced?.(commit.reason);
    if (commit.reason === 'duplicate') return;
    if (commit.reason === 'missing') return void this.reRegister(session);
    this.deps.logger.info({ streamId: record.streamId, reason: commit.reason }, 'tick refused by the store: stream owned or ended elsewhere, leaving it');
    // Not ours any more: no tick, keepalive or delete from here (the owner or the ender does them).
    void this.local.remove(record.streamId);
  }

  /** Reads the stream's prompt from the store (a PATCH served by another replica). */
  async refreshPrompt(streamId: string): Promise<void> {
    const session = this.local.get(streamId);
    if (!session) return;
    const rec = await this.deps.store.getSession(streamId);
    if (rec?.state === 'active' && rec.owner === this.deps.replicaId && !session.runtime.ending) {
      session.record.prompt = rec.prompt;
      session.record.promptRev = rec.promptRev;
    }
  }

  /**
   * Writes a lost record back from memory under a new epoch and takes its slot again (the store
   * restarted empty). Only if it is still absent: when two replicas held the stream (a stale copy
   * and its owner), the first to write it back keeps it and the other leaves, so no tick runs twice.
   */
  async reRegister(session: LiveSession): Promise<void> {
    const { record } = session;
    if (this.reRegistering.has(record.streamId) || session.runtime.ending) return;
    this.reRegistering.add(record.streamId);
    const { store, logger, cfg, clock } = this.deps;
    try {
      record.epoch += 1;
      if (!(await store.restoreSession(recordOf(session, this.deps.replicaId, clock.now())))) {
        // Written back already: by this replica (a caller that read the store before it did), or by another.
        const rec = await store.getSession(record.streamId);
        if (rec?.state === 'active' && rec.owner === this.deps.replicaId) {
          record.epoch = rec.epoch;
          return;
        }
        logger.info({ streamId: record.streamId, owner: rec?.owner ?? null }, 'another replica wrote the lost stream back first: leaving it');
        await this.local.remove(record.streamId);
        return;
      }
      if (!(await store.acquireSlot(record.keyHash, record.slotId, cfg.maxStreamsPerKey, this.deps.replicaId))) {
        logger.warn({ streamId: record.streamId, key: record.keyHash }, 're-registered stream found its key at the stream limit');
      }
      await store.bindSlot(record.keyHash, record.slotId, record.streamId);
      logger.warn({ streamId: record.streamId, epoch: record.epoch }, 'store had lost the stream: re-registered from this replica');
    } catch (err) {
      logger.warn({ err, streamId: record.streamId }, 'could not re-register a lost stream; retried at the next tick');
    } finally {
      this.reRegistering.delete(record.streamId);
    }
  }
}

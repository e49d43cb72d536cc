/**
 * Keeps this owner's copy of a record (`LiveSession.record`) and the store's in step: a tick
 * commit's answer (a new prompt revision is read, a lost stream stops here, a lost record is
 * written back), a prompt changed on another replica, a record the store lost.
 */
import type { TickCommit } from '../store/store';
import type { LocalSessions } from './local-sessions';
import { recordOf } from './ownership';
import type { LiveSession, SessionContext } from './session-ports';

export class RecordSync {
  private readonly reRegistering = new Set<string>();

  constructor(
    private readonly deps: SessionContext,
    private readonly local: Pick<LocalSessions, 'get' | 'stop'>,
    private readonly replicaId: string,
  ) {}

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
    this.deps.logger.info({ streamId: record.streamId, reason: commit.reason }, 'tick refused by the store: stream owned or ended elsewhere, stopping here');
    void this.local.stop(session);
  }

  /** Reads the stream's prompt from the store (a PATCH served by another replica). */
  async refreshPrompt(streamId: string): Promise<void> {
    const session = this.local.get(streamId);
    if (!session) return;
    const rec = await this.deps.store.getSession(streamId);
    if (rec?.state === 'active' && rec.owner === this.replicaId && !session.runtime.ending) {
      session.record.prompt = rec.prompt;
      session.record.promptRev = rec.promptRev;
    }
  }

  /** Writes a lost record back from memory under a new epoch and takes its slot again (the store restarted empty). */
  async reRegister(session: LiveSession): Promise<void> {
    const { record } = session;
    if (this.reRegistering.has(record.streamId) || session.runtime.ending) return;
    this.reRegistering.add(record.streamId);
    const { store, logger, cfg, clock } = this.deps;
    try {
      record.epoch += 1;
      await store.putSession(recordOf(session, this.replicaId, clock.now()));
      if (!(await store.acquireSlot(record.keyHash, record.slotId, cfg.maxStreamsPerKey, this.replicaId))) {
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

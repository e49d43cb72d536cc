/**
 * Keeps this owner's copy of a record (`LiveStream.record`) and the store's in step: a tick
 * commit's answer (a new prompt revision is read, a lost stream stops here, a lost record is
 * written back), a prompt changed on another replica, a record the store lost.
 */
import type { TickCommit } from '../../store/store';
import type { LiveStream } from './live-stream';
import { ownedBy } from './ownership';
import type { StreamsContext } from './ports';
import type { StreamRegistry } from './registry';

export class RecordSync {
  constructor(
    private readonly deps: StreamsContext,
    private readonly registry: StreamRegistry,
  ) {}

  /** The relay saw a new frame size: kept in the store, where any replica's stream info reads it. */
  frameSize(streamId: string, width: number, height: number): void {
    this.deps.store
      .updateRecord(streamId, { frameWidth: width, frameHeight: height })
      .catch((err: unknown) => this.deps.logger.warn({ err, streamId }, 'could not record the frame size'));
  }

  /**
   * A tick's commit answer: a new prompt revision is read; a lease renewed elsewhere is taken (the
   * lease check then needs no read); a lost stream stops here; a lost record is re-registered.
   */
  onCommit(stream: LiveStream, tick: number, commit: TickCommit): void {
    if (commit.ok) {
      stream.committed(tick);
      if (commit.promptRev !== stream.record.promptRev) void this.refreshPrompt(stream.id);
      if (commit.leaseExpiresAtMs > stream.record.leaseExpiresAtMs) stream.extendLease(commit.leaseExpiresAtMs);
      return;
    }
    this.deps.observer?.tickFenced?.(commit.reason);
    if (commit.reason === 'duplicate') return;
    if (commit.reason === 'missing') return void this.reRegister(stream);
    this.deps.logger.info(
      { streamId: stream.id, reason: commit.reason },
      'tick refused by the store: stream owned or ended elsewhere, leaving it',
    );
    // Not ours any more: no tick, keepalive or delete from here (the owner or the ender does them).
    void this.registry.remove(stream.id);
  }

  /** Reads the stream's prompt from the store (a PATCH served by another replica). */
  async refreshPrompt(streamId: string): Promise<void> {
    const stream = this.registry.get(streamId);
    if (!stream) return;
    const rec = await this.deps.store.getRecord(streamId);
    if (ownedBy(rec, this.deps.replicaId) && !stream.stopping) stream.adoptPrompt(rec.prompt, rec.promptRev);
  }

  /**
   * Writes a lost record back from memory under a new epoch and takes its slot again (the store
   * restarted empty). Only if it is still absent: when two replicas held the stream (a stale copy
   * and its owner), the first to write it back keeps it and the other leaves, so no tick runs twice.
   */
  async reRegister(stream: LiveStream): Promise<void> {
    const { record } = stream;
    if (stream.stopping || !stream.beginWriteBack()) return;
    const { store, logger, cfg, clock } = this.deps;
    try {
      stream.bumpEpoch();
      if (!(await store.restoreRecord(stream.toRecord(this.deps.replicaId, clock.now())))) {
        // Written back already: by this replica (a caller that read the store before it did), or by another.
        const rec = await store.getRecord(stream.id);
        if (ownedBy(rec, this.deps.replicaId)) return stream.takeEpoch(rec.epoch);
        logger.info({ streamId: stream.id, owner: rec?.owner ?? null }, 'another replica wrote the lost stream back first: leaving it');
        await this.registry.remove(stream.id);
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
      stream.endWriteBack();
    }
  }
}

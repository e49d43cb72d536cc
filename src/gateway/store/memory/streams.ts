import { setLongTimeout, type LongTimer } from '../../../lib/timers';
import type { Broker, OwnerFence, StreamRecord, StreamRecords, TickCommit, TickCommitInput } from '../store';
import type { MemoryFeedback } from './feedback';

/** Stream records and the fleet operations on them, in one process (the atomic steps are plain code: one thread). */
export class MemoryStreams implements StreamRecords {
  private readonly records = new Map<string, StreamRecord>();
  private readonly expiries = new Map<string, LongTimer>();

  constructor(
    /** Where a tick commit publishes its message. */
    private readonly broker: Broker,
    /** Whose entries of a stream go with its record. */
    private readonly feedback: MemoryFeedback,
  ) {}

  async putRecord(rec: StreamRecord): Promise<void> {
    this.records.set(rec.streamId, { ...rec });
  }

  async restoreRecord(rec: StreamRecord): Promise<boolean> {
    if (this.records.has(rec.streamId)) return false;
    await this.putRecord(rec);
    return true;
  }

  async getRecord(streamId: string): Promise<StreamRecord | undefined> {
    const s = this.records.get(streamId);
    return s && { ...s };
  }

  async updateRecord(streamId: string, patch: Partial<StreamRecord>): Promise<StreamRecord | undefined> {
    const s = this.records.get(streamId);
    if (!s) return undefined;
    Object.assign(s, patch);
    return { ...s };
  }

  async expireRecord(streamId: string, afterMs: number): Promise<void> {
    this.expiries.get(streamId)?.clear();
    const t = setLongTimeout(() => {
      const accountId = this.records.get(streamId)?.accountId;
      this.records.delete(streamId);
      this.expiries.delete(streamId);
      if (accountId !== undefined) this.feedback.dropStream(accountId, streamId);
    }, afterMs);
    this.expiries.set(streamId, t);
  }

  async endStream(streamId: string, reason: string, endedAtMs: number, fence?: OwnerFence): Promise<StreamRecord | undefined> {
    const s = this.active(streamId);
    if (!s || (fence && (s.owner !== fence.owner || s.epoch !== fence.epoch))) return undefined;
    const before = { ...s };
    Object.assign(s, { state: 'ended', endReason: reason, endedAtMs, owner: null, sealedKey: '' });
    return before;
  }

  async renewLease(streamId: string, leaseExpiresAtMs: number, nowMs: number) {
    const s = this.active(streamId);
    if (!s) return undefined;
    const out = { costMicrocents: s.costMicrocents, sinceMs: s.lastKeepaliveAtMs };
    Object.assign(s, { leaseExpiresAtMs, costMicrocents: 0, lastKeepaliveAtMs: nowMs });
    return out;
  }

  async addCost(streamId: string, costMicrocents: number): Promise<boolean> {
    const s = this.active(streamId);
    if (s) s.costMicrocents += costMicrocents;
    return s !== undefined;
  }

  async setPrompt(streamId: string, prompt: string, atMs: number): Promise<StreamRecord | undefined> {
    const s = this.active(streamId);
    if (!s) return undefined;
    Object.assign(s, { prompt, promptUpdatedAtMs: atMs, promptRev: s.promptRev + 1 });
    return { ...s };
  }

  async claimStream(streamId: string, expect: { owner: string | null; epoch: number }, owner: string): Promise<StreamRecord | undefined> {
    const s = this.active(streamId);
    if (!s || s.owner !== expect.owner || s.epoch !== expect.epoch) return undefined;
    Object.assign(s, { owner, epoch: s.epoch + 1 });
    return { ...s };
  }

  async commitTick(streamId: string, c: TickCommitInput): Promise<TickCommit> {
    const s = this.records.get(streamId);
    if (!s) return { ok: false, reason: 'missing' };
    if (s.state !== 'active') return { ok: false, reason: 'ended' };
    if (s.owner !== c.owner || s.epoch !== c.epoch) return { ok: false, reason: 'fenced' };
    if (c.tick <= s.lastTick) return { ok: false, reason: 'duplicate' };
    s.lastTick = c.tick;
    s.costMicrocents += c.costMicrocents;
    if (c.outcome) {
      if (c.outcome.ok) s.inferencesCompleted = (s.inferencesCompleted ?? 0) + 1;
      else s.inferencesFailed = (s.inferencesFailed ?? 0) + 1;
      s.lastInferenceMs = Math.max(0, Math.round(c.outcome.inferenceMs));
    }
    await this.broker.publish(c.channel, c.message, streamId);
    return { ok: true, promptRev: s.promptRev, leaseExpiresAtMs: s.leaseExpiresAtMs };
  }

  async indexedStreams(replicas: readonly string[]): Promise<Set<string>> {
    const owners = new Set(replicas);
    return new Set(
      [...this.records.values()].filter((s) => s.state === 'active' && s.owner !== null && owners.has(s.owner)).map((s) => s.streamId),
    );
  }

  async streamsOf(replica: string): Promise<string[]> {
    return [...this.records.values()].filter((s) => s.state === 'active' && s.owner === replica).map((s) => s.streamId);
  }

  /** Stops the tombstone timers (the store closes). */
  close(): void {
    for (const t of this.expiries.values()) t.clear();
    this.expiries.clear();
  }

  /** The live record (not a copy) of an active stream, for the fleet operations above. */
  private active(streamId: string): StreamRecord | undefined {
    const s = this.records.get(streamId);
    return s?.state === 'active' ? s : undefined;
  }
}

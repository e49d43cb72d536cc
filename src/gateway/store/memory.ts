import { idKey } from '../../lib/id-key';
import { realClock, setLongTimeout, type Clock, type LongTimer } from '../../lib/timers';
import { ChannelSubscribers } from './channel-subscribers';
import type { ResultWindow } from './result-windows';
import type {
  FeedbackAdd,
  FeedbackLimits,
  FeedbackPage,
  FeedbackRecord,
  HashUpdate,
  Membership,
  OwnerFence,
  SessionRecord,
  SlotHolder,
  Store,
  TickCommit,
  TickCommitInput,
  Unsubscribe,
} from './store';

/**
 * The embedded default store: one process, no persistence. Several gateways built on one instance
 * behave as replicas of a fleet (the in-process tests of ownership and failover use that).
 */
export class MemoryStore implements Store {
  private readonly slots = new Map<string, Map<string, SlotHolder>>();
  private readonly heartbeats = new Map<string, number>();
  private readonly draining = new Set<string>();
  private readonly impaired = new Set<string>();
  private readonly once = new Map<string, number>();
  private readonly clock: Pick<Clock, 'now'>;

  constructor(opts: { clock?: Pick<Clock, 'now'> } = {}) {
    this.clock = opts.clock ?? realClock;
    this.windowEpochMs = this.clock.now();
  }
  private readonly sessions = new Map<string, SessionRecord>();
  private readonly expiries = new Map<string, LongTimer>();
  /** Per account, oldest first; `seq` is the page cursor (stable while older entries are pruned). */
  private readonly feedback = new Map<string, { seq: number; rec: FeedbackRecord }[]>();
  private readonly feedbackPerStream = new Map<string, number>();
  private feedbackSeq = 0;
  private readonly subscribers = new ChannelSubscribers();
  private readonly hashes = new Map<string, Map<string, number>>();

  async acquireSlot(keyHash: string, slotId: string, limit: number, replica?: string): Promise<boolean> {
    const held = this.slots.get(keyHash) ?? new Map<string, SlotHolder>();
    if (held.has(slotId)) return true;
    if (held.size >= limit) return false;
    held.set(slotId, { slotId, replica: replica ?? null, streamId: null, acquiredAtMs: this.clock.now() });
    this.slots.set(keyHash, held);
    return true;
  }

  async bindSlot(keyHash: string, slotId: string, streamId: string): Promise<void> {
    const slot = this.slots.get(keyHash)?.get(slotId);
    if (slot) slot.streamId = streamId;
  }

  async restoreSlot(keyHash: string, slotId: string, streamId: string, replica: string): Promise<boolean> {
    const held = this.slots.get(keyHash) ?? new Map<string, SlotHolder>();
    if (held.has(slotId)) return false;
    held.set(slotId, { slotId, replica, streamId, acquiredAtMs: this.clock.now() });
    this.slots.set(keyHash, held);
    return true;
  }

  async slotHolders(keyHash: string): Promise<SlotHolder[]> {
    return [...(this.slots.get(keyHash)?.values() ?? [])].map((s) => ({ ...s }));
  }

  async slotKeys(): Promise<string[]> {
    return [...this.slots.keys()];
  }

  async releaseSlot(keyHash: string, slotId: string): Promise<boolean> {
    const held = this.slots.get(keyHash);
    if (!held?.delete(slotId)) return false;
    if (held.size === 0) this.slots.delete(keyHash);
    return true;
  }

  async putSession(rec: SessionRecord): Promise<void> {
    this.sessions.set(rec.streamId, { ...rec });
  }

  async restoreSession(rec: SessionRecord): Promise<boolean> {
    if (this.sessions.has(rec.streamId)) return false;
    await this.putSession(rec);
    return true;
  }

  async getSession(streamId: string): Promise<SessionRecord | undefined> {
    const s = this.sessions.get(streamId);
    return s && { ...s };
  }

  async updateSession(streamId: string, patch: Partial<SessionRecord>): Promise<SessionRecord | undefined> {
    const s = this.sessions.get(streamId);
    if (!s) return undefined;
    Object.assign(s, patch);
    return { ...s };
  }

  async expireSession(streamId: string, afterMs: number): Promise<void> {
    this.expiries.get(streamId)?.clear();
    const t = setLongTimeout(() => {
      const accountId = this.sessions.get(streamId)?.accountId;
      this.sessions.delete(streamId);
      this.expiries.delete(streamId);
      if (accountId !== undefined) this.dropFeedback(accountId, streamId);
    }, afterMs);
    this.expiries.set(streamId, t);
  }

  /** The live record (not a copy) of an active session, for the fleet operations below. */
  private active(streamId: string): SessionRecord | undefined {
    const s = this.sessions.get(streamId);
    return s?.state === 'active' ? s : undefined;
  }

  async endSession(streamId: string, reason: string, endedAtMs: number, fence?: OwnerFence): Promise<SessionRecord | undefined> {
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

  async setPrompt(streamId: string, prompt: string, atMs: number): Promise<SessionRecord | undefined> {
    const s = this.active(streamId);
    if (!s) return undefined;
    Object.assign(s, { prompt, promptUpdatedAtMs: atMs, promptRev: s.promptRev + 1 });
    return { ...s };
  }

  async claimSession(streamId: string, expect: { owner: string | null; epoch: number }, owner: string): Promise<SessionRecord | undefined> {
    const s = this.active(streamId);
    if (!s || s.owner !== expect.owner || s.epoch !== expect.epoch) return undefined;
    Object.assign(s, { owner, epoch: s.epoch + 1 });
    return { ...s };
  }

  async commitTick(streamId: string, c: TickCommitInput): Promise<TickCommit> {
    const s = this.sessions.get(streamId);
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
    await this.publish(c.channel, c.message, streamId);
    return { ok: true, promptRev: s.promptRev, leaseExpiresAtMs: s.leaseExpiresAtMs };
  }

  async indexedSessions(replicas: readonly string[]): Promise<Set<string>> {
    const owners = new Set(replicas);
    return new Set(
      [...this.sessions.values()].filter((s) => s.state === 'active' && s.owner !== null && owners.has(s.owner)).map((s) => s.streamId),
    );
  }

  async sessionsOf(replica: string): Promise<string[]> {
    return [...this.sessions.values()].filter((s) => s.state === 'active' && s.owner === replica).map((s) => s.streamId);
  }

  async heartbeat(replica: string): Promise<number> {
    const now = this.clock.now();
    this.heartbeats.set(replica, now);
    return now;
  }

  async membership(deadAfterMs: number): Promise<Membership> {
    const nowMs = this.clock.now();
    const alive: string[] = [];
    const dead: string[] = [];
    for (const [id, at] of this.heartbeats) (nowMs - at > deadAfterMs ? dead : alive).push(id);
    const members = (set: Set<string>) => [...set].filter((r) => this.heartbeats.has(r));
    return { alive, dead, draining: members(this.draining), impaired: members(this.impaired), nowMs };
  }

  async markDraining(replica: string): Promise<void> {
    this.draining.add(replica);
  }

  async markImpaired(replica: string, impaired: boolean): Promise<void> {
    if (impaired) this.impaired.add(replica);
    else this.impaired.delete(replica);
  }

  async forgetReplica(replica: string): Promise<void> {
    this.heartbeats.delete(replica);
    this.draining.delete(replica);
    this.impaired.delete(replica);
  }

  async claimOnce(key: string, ttlMs: number): Promise<boolean> {
    const now = this.clock.now();
    const until = this.once.get(key);
    if (until !== undefined && until > now) return false;
    this.once.set(key, now + ttlMs);
    return true;
  }

  async addFeedback(rec: FeedbackRecord, limits: FeedbackLimits): Promise<FeedbackAdd> {
    const list = this.feedback.get(rec.accountId) ?? [];
    const ofStream = this.feedbackPerStream.get(rec.stream_id) ?? 0;
    if (ofStream >= limits.perStream) return 'stream_full';
    if (list.length >= limits.perAccount) return 'account_full';
    list.push({ seq: ++this.feedbackSeq, rec: { ...rec } });
    this.feedback.set(rec.accountId, list);
    this.feedbackPerStream.set(rec.stream_id, ofStream + 1);
    return 'ok';
  }

  async feedbackOf(accountId: string, page: { limit: number; after?: string | null }): Promise<FeedbackPage> {
    const list = this.feedback.get(accountId) ?? [];
    const after = Number(page.after ?? 0) || 0;
    const start = list.findIndex((f) => f.seq > after);
    if (start < 0) return { items: [], next: null };
    const slice = list.slice(start, start + page.limit);
    const more = start + page.limit < list.length;
    return { items: slice.map((f) => ({ ...f.rec })), next: more ? String(slice[slice.length - 1].seq) : null };
  }

  private dropFeedback(accountId: string, streamId: string): void {
    this.feedbackPerStream.delete(streamId);
    const list = this.feedback.get(accountId);
    if (!list) return;
    const kept = list.filter((f) => f.rec.stream_id !== streamId);
    if (kept.length > 0) this.feedback.set(accountId, kept);
    else this.feedback.delete(accountId);
  }

  /** One process, one order: the route (see `Broker`) is a Cluster's concern. */
  async publish(channel: string, message: string, _route: string): Promise<void> {
    this.subscribers.deliver(channel, message);
  }

  async subscribe(channel: string, onMessage: (message: string) => void): Promise<Unsubscribe> {
    return this.subscribers.add(channel, onMessage);
  }

  private hash(key: string): Map<string, number> {
    let h = this.hashes.get(key);
    if (!h) this.hashes.set(key, (h = new Map()));
    return h;
  }

  async hbatch(updates: readonly HashUpdate[]): Promise<void> {
    for (const u of updates) this.hupdate(u);
  }

  private hupdate(u: HashUpdate): void {
    // No field, no hash (as in Redis, where an empty hash does not exist).
    if (!Object.keys({ ...u.incr, ...u.min, ...u.max }).length) return;
    const h = this.hash(u.key);
    for (const [f, by] of Object.entries(u.incr ?? {})) h.set(f, (h.get(f) ?? 0) + by);
    for (const [f, v] of Object.entries(u.min ?? {})) {
      const cur = h.get(f);
      if (cur === undefined || v < cur) h.set(f, v);
    }
    for (const [f, v] of Object.entries(u.max ?? {})) {
      const cur = h.get(f);
      if (cur === undefined || v > cur) h.set(f, v);
    }
  }

  async hgetall(key: string): Promise<Record<string, number>> {
    return Object.fromEntries(this.hashes.get(key) ?? []);
  }

  async hdel(key: string, fields: readonly string[]): Promise<void> {
    const h = this.hashes.get(key);
    if (!h) return;
    for (const f of fields) h.delete(f);
    if (h.size === 0) this.hashes.delete(key);
  }

  async keys(prefix: string): Promise<string[]> {
    return [...this.hashes.keys()].filter((k) => k.startsWith(prefix));
  }

  // ── Result windows (reinfer): one per delivered result for `resultWindowSeconds`, so a stream
  // holds hundreds at once and each is kept small: what a stream's windows share (stream, account,
  // mode, fps) is one counted `WindowShape`, an entry keeps its numbers, its expiry as an offset from
  // `windowEpochMs` (a small integer V8 stores inline), its key the result id's `idKey`. Entries go in time order with one configured
  // TTL, so a sweep from the oldest stops at the first live one; `get` checks expiry itself.
  private readonly windows = new Map<string, StoredWindow>();
  private readonly windowShapes = new Map<string, WindowShape>();
  private readonly windowEpochMs: number;
  private nextWindowSweepMs = 0;

  async putResultWindow(resultId: string, window: ResultWindow, ttlMs: number): Promise<void> {
    const now = this.clock.now();
    if (now >= this.nextWindowSweepMs) {
      this.nextWindowSweepMs = now + 1000;
      for (const [id, w] of this.windows) {
        if (w.expiresAt + this.windowEpochMs > now) break;
        this.dropWindow(id, w);
      }
    }
    const key = idKey(resultId);
    const known = this.windows.get(key);
    if (known) this.dropWindow(key, known);
    const shapeKey = `${window.streamId}\0${window.accountId}\0${window.mode}\0${window.maxFps}`;
    let shape = this.windowShapes.get(shapeKey);
    if (!shape) {
      shape = { key: shapeKey, streamId: window.streamId, accountId: window.accountId, mode: window.mode, maxFps: window.maxFps, refs: 0 };
      this.windowShapes.set(shapeKey, shape);
    }
    shape.refs++;
    this.windows.set(key, { shape, startMs: window.startMs, endMs: window.endMs, expiresAt: now + ttlMs - this.windowEpochMs });
  }

  async getResultWindow(resultId: string): Promise<ResultWindow | undefined> {
    const key = idKey(resultId);
    const w = this.windows.get(key);
    if (!w) return undefined;
    if (w.expiresAt + this.windowEpochMs <= this.clock.now()) {
      this.dropWindow(key, w);
      return undefined;
    }
    // A copy, as Redis answers one: a caller never holds the store's own objects.
    const { streamId, accountId, mode, maxFps } = w.shape;
    return { streamId, accountId, mode, startMs: w.startMs, endMs: w.endMs, maxFps };
  }

  private dropWindow(key: string, w: StoredWindow): void {
    this.windows.delete(key);
    if (--w.shape.refs === 0) this.windowShapes.delete(w.shape.key);
  }

  async ready(): Promise<boolean> {
    return true;
  }

  async close(): Promise<void> {
    for (const t of this.expiries.values()) t.clear();
    this.expiries.clear();
    this.subscribers.clear();
    this.windows.clear();
    this.windowShapes.clear();
  }
}

/** What the result windows of one stream share, with the number of stored windows that use it. */
interface WindowShape {
  readonly key: string;
  readonly streamId: string;
  readonly accountId: string;
  readonly mode: ResultWindow['mode'];
  readonly maxFps: number;
  refs: number;
}

/** One stored result window: its shape, where it lies on the stream clock, when it expires (ms after `windowEpochMs`). */
interface StoredWindow {
  readonly shape: WindowShape;
  readonly startMs: number;
  readonly endMs: number;
  readonly expiresAt: number;
}

import { setLongTimeout, type LongTimer } from '../../lib/timers';
import type { FeedbackAdd, FeedbackLimits, FeedbackPage, FeedbackRecord, SessionRecord, Store, Unsubscribe } from './store';

/** The embedded default store: one process, no persistence. */
export class MemoryStore implements Store {
  private readonly slots = new Map<string, Set<string>>();
  private readonly sessions = new Map<string, SessionRecord>();
  private readonly expiries = new Map<string, LongTimer>();
  /** Per account, oldest first; `seq` is the page cursor (stable while older entries are pruned). */
  private readonly feedback = new Map<string, { seq: number; rec: FeedbackRecord }[]>();
  private readonly feedbackPerStream = new Map<string, number>();
  private feedbackSeq = 0;
  private readonly channels = new Map<string, Set<(m: string) => void>>();
  private readonly hashes = new Map<string, Map<string, number>>();

  async acquireSlot(keyHash: string, streamId: string, limit: number): Promise<boolean> {
    const set = this.slots.get(keyHash) ?? new Set<string>();
    if (set.has(streamId)) return true;
    if (set.size >= limit) return false;
    set.add(streamId);
    this.slots.set(keyHash, set);
    return true;
  }

  async releaseSlot(keyHash: string, streamId: string): Promise<boolean> {
    const set = this.slots.get(keyHash);
    if (!set?.delete(streamId)) return false;
    if (set.size === 0) this.slots.delete(keyHash);
    return true;
  }

  async slotsInUse(keyHash: string): Promise<number> {
    return this.slots.get(keyHash)?.size ?? 0;
  }

  async putSession(rec: SessionRecord): Promise<void> {
    this.sessions.set(rec.streamId, { ...rec });
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

  async publish(channel: string, message: string): Promise<void> {
    for (const fn of this.channels.get(channel) ?? []) fn(message);
  }

  async subscribe(channel: string, onMessage: (message: string) => void): Promise<Unsubscribe> {
    const set = this.channels.get(channel) ?? new Set();
    set.add(onMessage);
    this.channels.set(channel, set);
    return () => {
      set.delete(onMessage);
      if (set.size === 0) this.channels.delete(channel);
    };
  }

  private hash(key: string): Map<string, number> {
    let h = this.hashes.get(key);
    if (!h) this.hashes.set(key, (h = new Map()));
    return h;
  }

  async hincr(key: string, field: string, by = 1): Promise<void> {
    const h = this.hash(key);
    h.set(field, (h.get(field) ?? 0) + by);
  }

  async hsetMin(key: string, field: string, value: number): Promise<void> {
    const h = this.hash(key);
    const cur = h.get(field);
    if (cur === undefined || value < cur) h.set(field, value);
  }

  async hsetMax(key: string, field: string, value: number): Promise<void> {
    const h = this.hash(key);
    const cur = h.get(field);
    if (cur === undefined || value > cur) h.set(field, value);
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

  async ready(): Promise<boolean> {
    return true;
  }

  async close(): Promise<void> {
    for (const t of this.expiries.values()) t.clear();
    this.expiries.clear();
    this.channels.clear();
  }
}

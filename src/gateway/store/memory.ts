import type { FeedbackRecord, SessionRecord, Store, Unsubscribe } from './store';

/** The embedded default store: one process, no persistence. */
export class MemoryStore implements Store {
  private readonly slots = new Map<string, Set<string>>();
  private readonly sessions = new Map<string, SessionRecord>();
  private readonly expiries = new Map<string, NodeJS.Timeout>();
  private readonly feedback: FeedbackRecord[] = [];
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
    clearTimeout(this.expiries.get(streamId));
    const t = setTimeout(() => {
      this.sessions.delete(streamId);
      this.expiries.delete(streamId);
    }, afterMs);
    t.unref();
    this.expiries.set(streamId, t);
  }


  async addFeedback(rec: FeedbackRecord): Promise<void> {
    this.feedback.push({ ...rec });
  }

  async feedbackOf(accountId: string): Promise<FeedbackRecord[]> {
    return this.feedback.filter((f) => f.accountId === accountId).map((f) => ({ ...f }));
  }

  async publish(channel: string, message: string): Promise<void> {
    for (const fn of this.channels.get(channel) ?? []) fn(message);
  }

  subscribe(channel: string, onMessage: (message: string) => void): Unsubscribe {
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
    for (const t of this.expiries.values()) clearTimeout(t);
    this.expiries.clear();
    this.channels.clear();
  }
}

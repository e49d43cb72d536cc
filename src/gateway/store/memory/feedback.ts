import type { Feedback, FeedbackAdd, FeedbackLimits, FeedbackPage, FeedbackRecord } from '../store';

/** Legacy feedback, capped per stream and per account; an account's entries oldest first. */
export class MemoryFeedback implements Feedback {
  /** Per account, oldest first; `seq` is the page cursor (stable while older entries are pruned). */
  private readonly byAccount = new Map<string, { seq: number; rec: FeedbackRecord }[]>();
  private readonly perStream = new Map<string, number>();
  private seq = 0;

  async addFeedback(rec: FeedbackRecord, limits: FeedbackLimits): Promise<FeedbackAdd> {
    const list = this.byAccount.get(rec.accountId) ?? [];
    const ofStream = this.perStream.get(rec.stream_id) ?? 0;
    if (ofStream >= limits.perStream) return 'stream_full';
    if (list.length >= limits.perAccount) return 'account_full';
    list.push({ seq: ++this.seq, rec: { ...rec } });
    this.byAccount.set(rec.accountId, list);
    this.perStream.set(rec.stream_id, ofStream + 1);
    return 'ok';
  }

  async feedbackOf(accountId: string, page: { limit: number; after?: string | null }): Promise<FeedbackPage> {
    const list = this.byAccount.get(accountId) ?? [];
    const after = Number(page.after ?? 0) || 0;
    const start = list.findIndex((f) => f.seq > after);
    if (start < 0) return { items: [], next: null };
    const slice = list.slice(start, start + page.limit);
    const more = start + page.limit < list.length;
    return { items: slice.map((f) => ({ ...f.rec })), next: more ? String(slice[slice.length - 1].seq) : null };
  }

  /** A stream's entries go with its record (./streams.ts, at the end of its tombstone). */
  dropStream(accountId: string, streamId: string): void {
    this.perStream.delete(streamId);
    const list = this.byAccount.get(accountId);
    if (!list) return;
    const kept = list.filter((f) => f.rec.stream_id !== streamId);
    if (kept.length > 0) this.byAccount.set(accountId, kept);
    else this.byAccount.delete(accountId);
  }
}

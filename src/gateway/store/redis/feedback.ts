import type { Feedback, FeedbackAdd, FeedbackLimits, FeedbackPage, FeedbackRecord } from '../store';
import { RedisRole } from './role';

/** Legacy feedback: an account's keys share its hash tag, so each cap is checked and added in one script. */
export class RedisFeedback extends RedisRole implements Feedback {
  async addFeedback(rec: FeedbackRecord, limits: FeedbackLimits): Promise<FeedbackAdd> {
    return this.guard('addFeedback', async () => {
      const keys = this.key.feedback(rec.accountId);
      const streamSets = this.key.feedbackStreamPrefix(rec.accountId);
      return (await this.redis.addFeedbackLua(
        ...keys,
        streamSets,
        rec.stream_id,
        limits.perStream,
        limits.perAccount,
        JSON.stringify(rec),
      )) as FeedbackAdd;
    });
  }

  async feedbackOf(accountId: string, page: { limit: number; after?: string | null }): Promise<FeedbackPage> {
    return this.guard('feedbackOf', async () => {
      const after = Number(page.after ?? 0) || 0;
      const keys = this.key.feedback(accountId).slice(0, 4);
      const streamSets = this.key.feedbackStreamPrefix(accountId);
      const [next, ...items] = (await this.redis.feedbackPageLua(...keys, streamSets, after, page.limit)) as string[];
      return { items: items.map((j) => JSON.parse(j) as FeedbackRecord), next: next || null };
    });
  }
}

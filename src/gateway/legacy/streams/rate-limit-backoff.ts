/**
 * Upstream rate limits (429 on a tick's completion): the provider limits requests per user, so one
 * stream's 429 holds back every stream of that key on this replica until the hinted time
 * (`retry-after`, or `x-ratelimit-reset` once `x-ratelimit-remaining` is 0). Ticks due before then
 * are skipped, not queued; the stream never ends for it. Each stream resumes after its own jitter,
 * so a key's streams do not come back in lock-step.
 */
import { LRUCache } from 'lru-cache';

/** The wait when a 429 names none (the provider's `retry-after` is currently 1 s). */
export const DEFAULT_RATE_LIMIT_WAIT_MS = 1000;
/** The most a single 429 holds a key back, whatever it hints. */
export const MAX_RATE_LIMIT_WAIT_MS = 60_000;
/** A key's streams resume spread over this time after a hold ends. */
export const RESUME_SPREAD_MS = 500;

export class RateLimitBackoff {
  /** key hash → until when (ms) its streams skip their ticks. */
  private readonly held = new LRUCache<string, number>({ max: 100_000 });

  constructor(private readonly random: () => number = Math.random) {}

  /**
   * Notes a 429 for `keyHash` at `nowMs`, hinted to last `hintMs` (undefined: the default), and
   * returns until when the key is held back.
   */
  limited(keyHash: string, nowMs: number, hintMs: number | undefined): number {
    const wait = Math.min(MAX_RATE_LIMIT_WAIT_MS, Math.max(hintMs ?? DEFAULT_RATE_LIMIT_WAIT_MS, 0));
    const until = Math.max(this.held.get(keyHash) ?? 0, nowMs + wait);
    this.held.set(keyHash, until);
    return until;
  }

  /**
   * Whether a tick of a stream of `keyHash` at `nowMs` must be skipped: the key is held back, or
   * came out of it less than this stream's share (`jitterFraction`, 0..1) of `RESUME_SPREAD_MS` ago.
   */
  holds(keyHash: string, nowMs: number, jitterFraction: number): boolean {
    const until = this.held.get(keyHash);
    if (until === undefined) return false;
    if (nowMs < until + RESUME_SPREAD_MS * jitterFraction) return true;
    if (nowMs >= until + RESUME_SPREAD_MS) this.held.delete(keyHash);
    return false;
  }

  /** A stream's jitter, drawn once: where in the spread after a hold it resumes (0..1). */
  jitter(): number {
    return this.random();
  }
}

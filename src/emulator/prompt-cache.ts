/**
 * Prompt cache of chat completions, keyed by (account, thread_id, model). A request's prompt is a
 * sequence of units (each text part, each resolved frame); the cached part of a request is the
 * leading run of units it shares with the previous request of the same key.
 */
import { createHash } from 'node:crypto';
import { LRUCache } from 'lru-cache';

export type PromptUnit =
  { kind: 'text'; role: string; text: string } | { kind: 'frame'; streamId: string; index: number; tokensPerFrame: number };

/** Units are remembered as short digests: the cache holds no prompt text. */
export function unitKey(u: PromptUnit): string {
  if (u.kind === 'frame') return `f:${u.streamId}:${u.index}:${u.tokensPerFrame}`;
  return `t:${createHash('sha1').update(u.role).update('\0').update(u.text).digest('base64')}`;
}

export class PromptCache {
  /** The keys used last; past `maxEntries` the least recently used is forgotten. */
  private readonly entries: LRUCache<string, string[]>;

  constructor(maxEntries = 10_000) {
    this.entries = new LRUCache({ max: maxEntries });
  }

  static key(accountId: string, threadId: string, model: string): string {
    return JSON.stringify([accountId, threadId, model]);
  }

  /** Number of leading units shared with what this key saw last (0 on a miss). */
  commonPrefix(key: string, units: string[]): number {
    const prev = this.entries.get(key);
    if (!prev) return 0;
    let n = 0;
    while (n < prev.length && n < units.length && prev[n] === units[n]) n++;
    return n;
  }

  remember(key: string, units: string[]): void {
    this.entries.set(key, units);
  }
}

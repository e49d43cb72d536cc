import { createHash } from 'node:crypto';
import { LRUCache } from 'lru-cache';

/** Short, stable, non-reversible name of an API key, for state, logs and metrics (never the key). */
export function keyHash(apiKey: string): string {
  return createHash('sha256').update(apiKey).digest('hex').slice(0, 16);
}

const memo = new LRUCache<string, string>({ max: 1024 });

/** keyHash with a bounded memo, for hot paths that see the same few keys on every request (the passthrough). */
export function memoKeyHash(apiKey: string): string {
  let h = memo.get(apiKey);
  if (h === undefined) {
    h = keyHash(apiKey);
    memo.set(apiKey, h);
  }
  return h;
}

import { createHash } from 'node:crypto';

/** Short, stable, non-reversible name of an API key, for state, logs and metrics (never the key). */
export function keyHash(apiKey: string): string {
  return createHash('sha256').update(apiKey).digest('hex').slice(0, 16);
}

const MEMO_MAX = 1024;
const memo = new Map<string, string>();

/**
 * keyHash with a bounded memo, for hot paths that see the same few keys on every request (the
 * passthrough). Insertion-ordered Map: the oldest entry goes first when full.
 */
export function memoKeyHash(apiKey: string): string {
  let h = memo.get(apiKey);
  if (h === undefined) {
    h = keyHash(apiKey);
    if (memo.size >= MEMO_MAX) memo.delete(memo.keys().next().value as string);
    memo.set(apiKey, h);
  }
  return h;
}

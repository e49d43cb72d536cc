import { createHash } from 'node:crypto';

/** Short, stable, non-reversible name of an API key, for state, logs and metrics (never the key). */
export function keyHash(apiKey: string): string {
  return createHash('sha256').update(apiKey).digest('hex').slice(0, 16);
}

import { LRUCache } from 'lru-cache';
import type { Clock } from './timers';

/**
 * A bounded cache (least recently used dropped first) whose entries expire `ttlMs` after they were
 * set. No timers: expiry is checked on read, against `clock` when one is injected (tests; shifted by
 * 1 ms because lru-cache takes an entry set at time 0 for one without a TTL).
 */
export function expiring<V extends object | true>(max: number, ttlMs: number, clock?: Pick<Clock, 'now'>): LRUCache<string, V> {
  return new LRUCache<string, V>({ max, ttl: ttlMs, ttlResolution: 0, ...(clock ? { perf: { now: () => clock.now() + 1 } } : {}) });
}

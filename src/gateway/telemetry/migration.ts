/**
 * Migration progress of one API key (hash): is its owner moving from /v0.2 to /v1beta? Derived from
 * the last legacy call, the last /v1beta or /billing call seen through the passthrough with the same
 * key, and a bounded daily series of legacy requests. The rules (docs/operations.md):
 *
 *   inactive     no legacy and no passthrough call in the last ACTIVE_DAYS days
 *   migrated     passthrough calls in the last ACTIVE_DAYS days, no legacy call in that time
 *   migrating    legacy calls in the last ACTIVE_DAYS days and passthrough calls in the last HISTORY_DAYS
 *   legacy-only  legacy calls in the last ACTIVE_DAYS days and no passthrough call in the last HISTORY_DAYS
 */
import { LRUCache } from 'lru-cache';

export const MIGRATION_STATUSES = ['legacy-only', 'migrating', 'migrated', 'inactive'] as const;
export type MigrationStatus = (typeof MIGRATION_STATUSES)[number];

/** Days without any call after which a key counts as inactive. */
export const ACTIVE_DAYS = 14;
/** Days of daily legacy usage kept per key (older day fields are dropped), and the passthrough look-back. */
export const HISTORY_DAYS = 30;

const DAY_MS = 86_400_000;

export function migrationStatus(lastLegacyMs: number | undefined, lastPassthroughMs: number | undefined, now: number): MigrationStatus {
  const since = (ms: number | undefined, days: number) => ms !== undefined && ms >= now - days * DAY_MS;
  const legacyRecent = since(lastLegacyMs, ACTIVE_DAYS);
  if (!legacyRecent) return since(lastPassthroughMs, ACTIVE_DAYS) ? 'migrated' : 'inactive';
  return since(lastPassthroughMs, HISTORY_DAYS) ? 'migrating' : 'legacy-only';
}

/** Most distinct client families recorded per key (per process); the rest count as `other`. */
export const MAX_FAMILIES_PER_KEY = 8;

/** The same few User-Agents arrive on every passthrough call: each is parsed once. */
const families = new LRUCache<string, string>({ max: 512 });

const PRODUCT = /^([A-Za-z][\w.-]{0,39})\/v?(\d{1,4})(?:\.(\d{1,4}))?/;

/**
 * The client family of a User-Agent, bounded so a hostile header cannot grow the store: the first
 * product token with its major.minor version (`svc-python/1.4`, `python-requests/2.31`), `browser`
 * for any browser, `none` without a header, `other` for anything unparseable.
 */
export function clientFamily(userAgent: string | undefined): string {
  if (!userAgent) return 'none';
  let family = families.get(userAgent);
  if (family === undefined) {
    family = parseFamily(userAgent);
    families.set(userAgent, family);
  }
  return family;
}

function parseFamily(userAgent: string): string {
  if (userAgent.startsWith('Mozilla/')) return 'browser';
  const m = PRODUCT.exec(userAgent);
  if (!m) return 'other';
  return `${m[1]!.toLowerCase()}/${m[2]}${m[3] === undefined ? '' : `.${m[3]}`}`;
}

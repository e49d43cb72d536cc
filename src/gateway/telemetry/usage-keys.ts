/**
 * The usage counters' layout in the store (all hashes of numbers; names of `Counters` hashes, to
 * which the store adds its own prefix). Keys appear only as their hash; account ids (not secrets)
 * let an operator find the customer.
 *   depr:key:<keyHash>   first_seen_ms, last_seen_ms, req:<endpoint>, streams, source:<s>, mode:<m>,
 *                        field:<f>, backend:<b>, model:<m>, inferences:ok|failed, output_tokens,
 *                        ws_connections, end:<reason>, day:<YYYY-MM-DD> (legacy requests, last HISTORY_DAYS
 *                        days), ua:<client family>, refused:<brownout|sunset>
 *   depr:pt:<keyHash>    what the same key did through the passthrough: first_seen_ms, last_seen_ms,
 *                        v1beta, billing, ua:<client family>
 *   depr:acct:<keyHash>  <accountId> → last seen ms
 *   depr:day:<YYYY-MM-DD> (UTC) requests, streams, inferences, output_tokens, ws_connections, key:<keyHash>
 */

/** A key's legacy use, by key hash. */
export const PER_KEY = 'depr:key:';
/** The same key's passthrough use (/v1beta, /billing), by key hash. */
export const PER_KEY_PASSTHROUGH = 'depr:pt:';
/** The accounts a key was seen with, by key hash. */
export const PER_KEY_ACCOUNTS = 'depr:acct:';
/** The fleet's legacy use of one UTC day, by date. */
export const PER_DAY = 'depr:day:';

export const DAY_MS = 86_400_000;

export const utcDay = (ms: number): string => new Date(ms).toISOString().slice(0, 10);

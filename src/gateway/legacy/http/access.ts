/**
 * The rules every /v0.2 caller shares, HTTP routes and the results socket alike: the key check
 * (with its failed-auth budget), what a stream id looks like, and whether a key (its account) may
 * touch a stream.
 */
import type { Brand } from '../../../brand';
import { ServiceError } from '../../../lib/errors';
import type { StreamRecord, StreamRecords } from '../../store/store';
import type { FailedAuthLimiter } from './auth-failures';
import type { UpstreamCatalog } from '../streams/catalog';
import { streamAccess } from '../streams/ownership';
import type { StreamAccess } from '../streams/ownership';
import type { SocketAuth } from './results-socket';
import { LEGACY_CLOSES } from '../contract/closes';
import type { LegacyClose } from '../contract/closes';

/** A stream id: what the upstream hands out (word characters and dashes), at most 128 of them. */
const STREAM_ID = /^[\w-]{1,128}$/;

export function isStreamId(id: unknown): id is string {
  return typeof id === 'string' && STREAM_ID.test(id);
}

/** Reads the record and applies `streamAccess`; a malformed id never reaches the store. */
export async function readStreamAccess(
  store: Pick<StreamRecords, 'getRecord'>,
  streamId: string,
  accountId: string,
): Promise<StreamAccess> {
  return streamAccess(isStreamId(streamId) ? await store.getRecord(streamId) : null, accountId);
}

export interface KeyCheckDeps {
  brand: Brand;
  catalog: UpstreamCatalog;
  authLimiter?: FailedAuthLimiter;
}

/** A key check's outcome: the key and its account; or the client address is over its budget; or refused (counted). */
export type KeyCheck = { ok: true; apiKey: string; accountId: string } | { ok: false; blockedMs: number } | { ok: false; refused: string };

/**
 * The one key check of HTTP routes and results sockets: an address over its failed-auth budget is
 * refused before any check unless its key was accepted recently; a key that is missing, malformed
 * or refused upstream counts against the budget; an accepted key is remembered (the waiver). An
 * upstream that cannot tell throws.
 */
export async function checkKey(
  deps: KeyCheckDeps,
  ip: string,
  apiKey: string | undefined,
  ids?: () => { requestId?: string; traceId?: string },
): Promise<KeyCheck> {
  const { brand, catalog, authLimiter } = deps;
  const blockedMs = authLimiter?.blockedForMs(ip, apiKey) ?? 0;
  if (blockedMs > 0) return { ok: false, blockedMs };
  const refuse = (refused: string, refusedKey?: string): KeyCheck => {
    authLimiter?.fail(ip, refusedKey);
    return { ok: false, refused };
  };
  if (!apiKey) return refuse('Missing API key: send Authorization: Bearer <api_key>');
  if (!apiKey.startsWith(brand.keyPrefix)) return refuse('Invalid API key');
  let accountId: string;
  try {
    accountId = await catalog.accountOf(apiKey, ids?.());
  } catch (err) {
    if (err instanceof ServiceError && err.status === 401) return refuse(err.message, apiKey);
    throw err;
  }
  authLimiter?.accept(apiKey);
  return { ok: true, apiKey, accountId };
}

export interface SocketAuthorizerDeps extends KeyCheckDeps {
  store: Pick<StreamRecords, 'getRecord'>;
  /** Sunset policy of sockets: a close (1013) during a brownout or after the sunset, else undefined. */
  admitSocket?(record: StreamRecord): LegacyClose | undefined;
}

/**
 * The results socket's first-message check: `checkKey` (over the budget → 1013, refused → 1008),
 * then `streamAccess`, then the sunset policy. An upstream outage throws (the socket closes 1011).
 */
export function socketAuthorizer(deps: SocketAuthorizerDeps) {
  return async (apiKey: string, streamId: string, ip: string): Promise<SocketAuth> => {
    const key = await checkKey(deps, ip, apiKey);
    if (!key.ok) return { ok: false, ...('blockedMs' in key ? LEGACY_CLOSES.authRateLimited : LEGACY_CLOSES.authFailed) };
    const access = await readStreamAccess(deps.store, streamId, key.accountId);
    if (!access.ok) return { ok: false, ...LEGACY_CLOSES.streamNotFound };
    const refusal = deps.admitSocket?.(access.record);
    if (refusal) return { ok: false, ...refusal };
    return { ok: true, record: access.record };
  };
}

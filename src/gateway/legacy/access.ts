/**
 * The two rules every /v0.2 path that names a stream shares, HTTP routes and the results socket
 * alike: what a stream id looks like, and whether a key (its account) may touch a stream.
 */
import type { Brand } from '../../brand';
import { ServiceError } from '../../lib/errors';
import type { SessionRecord, SessionRecords } from '../store/store';
import type { FailedAuthLimiter } from './auth-failures';
import type { UpstreamCatalog } from './catalog';
import type { SocketAuth } from './results-socket';
import { LEGACY_CLOSES } from './closes';
import type { LegacyClose } from './closes';
import { LEGACY_ERRORS } from './errors';

/** A stream id: what the upstream hands out (word characters and dashes), at most 128 of them. */
const STREAM_ID = /^[\w-]{1,128}$/;

export function isStreamId(id: unknown): id is string {
  return typeof id === 'string' && STREAM_ID.test(id);
}

export type StreamAccess = { ok: true; record: SessionRecord } | { ok: false; refusal: 'stream_not_found' | 'forbidden' };

/** May this account touch this stream: unknown (or malformed) → not found, another account's → forbidden. */
export function streamAccess(record: SessionRecord | null | undefined, accountId: string): StreamAccess {
  if (!record) return { ok: false, refusal: 'stream_not_found' };
  if (record.accountId !== accountId) return { ok: false, refusal: 'forbidden' };
  return { ok: true, record };
}

/** Reads the record and applies `streamAccess`; a malformed id never reaches the store. */
export async function readStreamAccess(store: Pick<SessionRecords, 'getSession'>, streamId: string, accountId: string): Promise<StreamAccess> {
  return streamAccess(isStreamId(streamId) ? await store.getSession(streamId) : null, accountId);
}

/** The HTTP face of a refusal: 404 `stream_not_found` or 403 `forbidden`. */
export function accessError(refusal: 'stream_not_found' | 'forbidden', streamId: string): ServiceError {
  return refusal === 'stream_not_found' ? LEGACY_ERRORS.streamNotFound(streamId) : LEGACY_ERRORS.forbidden();
}

/** The socket face of a refusal: 1008 with the legacy code as reason. */
export function accessClose(refusal: 'stream_not_found' | 'forbidden'): LegacyClose {
  return refusal === 'stream_not_found' ? LEGACY_CLOSES.streamNotFound : LEGACY_CLOSES.forbidden;
}

export interface SocketAuthorizerDeps {
  brand: Brand;
  store: Pick<SessionRecords, 'getSession'>;
  catalog: UpstreamCatalog;
  authLimiter?: FailedAuthLimiter;
  /** Sunset policy of sockets: a close (1013) during a brownout or after the sunset, else undefined. */
  admitSocket?(record: SessionRecord): LegacyClose | undefined;
}

/**
 * The results socket's first-message check: the key (as the HTTP routes check it, budget and its
 * waiver for recently accepted keys included), then `streamAccess`, then the sunset policy. A
 * refused key closes 1008 and counts against the client address's failed-auth budget; an upstream
 * outage throws (the socket closes 1011).
 */
export function socketAuthorizer(deps: SocketAuthorizerDeps) {
  const { brand, store, catalog, authLimiter } = deps;
  return async (apiKey: string, streamId: string, ip: string): Promise<SocketAuth> => {
    if ((authLimiter?.blockedForMs(ip, apiKey) ?? 0) > 0) return { ok: false, ...LEGACY_CLOSES.authRateLimited };
    const refused = (refusedKey?: string): SocketAuth => (authLimiter?.fail(ip, refusedKey), { ok: false, ...LEGACY_CLOSES.authFailed });
    if (!apiKey.startsWith(brand.keyPrefix)) return refused();
    let accountId: string;
    try {
      accountId = await catalog.accountOf(apiKey);
    } catch (err) {
      if (err instanceof ServiceError && err.status === 401) return refused(apiKey);
      throw err;
    }
    authLimiter?.accept(apiKey);
    const access = await readStreamAccess(store, streamId, accountId);
    if (!access.ok) return { ok: false, ...accessClose(access.refusal) };
    const refusal = deps.admitSocket?.(access.record);
    if (refusal) return { ok: false, ...refusal };
    return { ok: true, record: access.record };
  };
}

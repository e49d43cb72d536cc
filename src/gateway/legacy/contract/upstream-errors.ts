/**
 * The one mapping from upstream failures to what a legacy client sees, for every /v0.2 path
 * (create, models, keepalive, results-socket auth, per-tick results).
 *
 * Legacy clients classify by status (legacy-clients.md): 401 is a bad key (fatal), 429 is their
 * 5-stream limit, >= 500 is the server's trouble (retried). So an upstream status is the client's
 * own only when the call was made with the client's key and the status speaks about that key or
 * account (401/403/402); everything else the upstream answers is the gateway's problem and becomes
 * 502/503/504 with a generic message. Details (upstream status, code, message, addresses) go to
 * the log, never to the client.
 */
import { ServiceError } from '../../../lib/errors';
import type { Logger } from '../../../lib/logger';
import { UpstreamError } from '../../../upstream/errors';
import { LEGACY_ERRORS } from './errors';
import { legacyError } from './validate';

/** Which legacy path made the call; `clientKey` says whether it carried the client's own key. */
export interface UpstreamCallContext {
  /** What the gateway was doing, for the client message ("create the stream"). */
  what: string;
  /** The call carried the client's key, so 401/402/403 speak about the client. */
  clientKey: boolean;
}

export const UPSTREAM_CONTEXTS = {
  create: { what: 'create the stream', clientKey: true },
  authenticate: { what: 'check the API key', clientKey: true },
  balance: { what: 'read the balance', clientKey: true },
  keepalive: { what: 'renew the stream', clientKey: true },
  models: { what: 'list the models', clientKey: false },
  reinfer: { what: 're-run the result', clientKey: true },
  info: { what: 'read the stream', clientKey: true },
  spectate: { what: 'issue a viewer token', clientKey: true },
} as const satisfies Record<string, UpstreamCallContext>;

/** Legacy status and code for one upstream failure (before message and headers). */
export function legacyStatusOf(err: UpstreamError, ctx: UpstreamCallContext): { status: number; code: string } {
  if (err.code === 'upstream_circuit_open') return { status: 503, code: 'upstream_unavailable' };
  if (err.kind === 'timeout') return { status: 504, code: 'upstream_timeout' };
  if (err.kind === 'network') return { status: 502, code: 'upstream_unreachable' };
  const s = err.status;
  if (ctx.clientKey) {
    if (s === 401) return { status: 401, code: 'unauthorized' };
    if (s === 402) return { status: 402, code: 'insufficient_credits' };
    if (s === 403) return { status: 403, code: 'forbidden' };
  }
  // The upstream limiting the gateway is not the client's 5-stream limit: retryable, never 429.
  if (s === 429 || s === 503) return { status: 503, code: 'upstream_unavailable' };
  if (s === 504) return { status: 504, code: 'upstream_timeout' };
  return { status: 502, code: 'upstream_error' };
}

const MESSAGES: Record<string, (what: string) => string> = {
  unauthorized: () => 'Invalid or revoked API key',
  insufficient_credits: () => 'Insufficient credits',
  forbidden: () => 'This API key cannot access this resource',
  upstream_unavailable: (what) => `The service is temporarily unable to ${what}; retry later`,
  upstream_timeout: (what) => `The service did not answer in time to ${what}; retry later`,
  upstream_unreachable: (what) => `The service could not be reached to ${what}; retry later`,
  upstream_error: (what) => `The service failed to ${what}; retry later`,
};

/**
 * Upstream failure → legacy ServiceError. Errors that are not the upstream's (our own legacy
 * errors, bugs) pass through unchanged; a closed upstream client (shutdown) is a 503.
 */
export function toLegacyError(err: unknown, ctx: UpstreamCallContext, log?: Logger): Error {
  if (err instanceof ServiceError && err.code === 'upstream_client_closed') {
    return LEGACY_ERRORS.shuttingDown();
  }
  if (!(err instanceof UpstreamError)) return err as Error;
  const { status, code } = legacyStatusOf(err, ctx);
  if (status >= 500) {
    log?.warn(
      { op: ctx.what, upstreamStatus: err.status, upstreamCode: err.code, kind: err.kind, err: err.message },
      'upstream failure answered as a legacy error',
    );
  }
  const out = legacyError(status, code, MESSAGES[code]!(ctx.what));
  // A retry hint the upstream gave is worth passing on to a client told to retry.
  if (status === 503 && err.retryAfterMs !== undefined) {
    return new ServiceError(status, code, out.message, {
      shape: 'legacy',
      details: null,
      headers: { 'retry-after': String(Math.max(1, Math.ceil(err.retryAfterMs / 1000))) },
    });
  }
  return out;
}

/**
 * The `error` text of an `ok: false` result: the legacy code and status, never the upstream's
 * message (it may name internal hosts); e.g. `upstream_unavailable (503): the service is
 * temporarily unable to run the inference`.
 */
export function legacyResultError(err: unknown): string {
  if (err instanceof ServiceError && !(err instanceof UpstreamError)) {
    return err.code === 'upstream_client_closed' ? 'shutting_down: the gateway is shutting down' : `${err.code}: ${err.message}`;
  }
  if (!(err instanceof UpstreamError)) return 'internal_error: the inference failed';
  const { status, code } = legacyStatusOf(err, { what: 'run the inference', clientKey: true });
  const detail = err.upstreamCode && /^[a-z][a-z0-9_]{0,39}$/.test(err.upstreamCode) ? ` [${err.upstreamCode}]` : '';
  return `${code} (${status})${detail}: ${MESSAGES[code]!('run the inference').toLowerCase()}`;
}

/**
 * Errors of the upstream client. Every failure of a /v1beta or /billing call becomes an
 * UpstreamError, so callers branch on `status`, `code` and `kind`, never on undici internals.
 */
import { ServiceError } from '../lib/errors';
import type { ErrorShape } from '../lib/errors';
import { isRecord } from '../lib/is-record';

/** `http`: the upstream answered with an error status; `network`: no usable answer; `timeout`: too slow. */
export type UpstreamErrorKind = 'http' | 'network' | 'timeout';

export interface UpstreamErrorInit {
  kind: UpstreamErrorKind;
  status: number;
  message: string;
  /** Overrides the code derived from `upstreamCode` or the kind. */
  code?: string;
  /** `detail.error.code` of the upstream body, when present. */
  upstreamCode?: string;
  /** Parsed upstream body (the raw text when it was not JSON; undefined without an answer). */
  body?: unknown;
  retryAfterMs?: number;
  /** The failure happened after a 2xx answer's body had started: never retried. */
  bodyStarted?: boolean;
  shape?: ErrorShape;
  cause?: unknown;
}

export class UpstreamError extends ServiceError {
  override name = 'UpstreamError';
  readonly kind: UpstreamErrorKind;
  readonly upstreamCode: string | undefined;
  readonly body: unknown;
  readonly retryAfterMs: number | undefined;
  readonly bodyStarted: boolean;

  constructor(init: UpstreamErrorInit) {
    super(init.status, init.code ?? init.upstreamCode ?? fallbackCode(init.kind, init.status), init.message, {
      shape: init.shape ?? 'detail',
      cause: init.cause,
      headers: init.retryAfterMs === undefined ? undefined : { 'retry-after': String(Math.ceil(init.retryAfterMs / 1000)) },
    });
    this.kind = init.kind;
    this.upstreamCode = init.upstreamCode;
    this.body = init.body;
    this.retryAfterMs = init.retryAfterMs;
    this.bodyStarted = init.bodyStarted ?? false;
  }
}

function fallbackCode(kind: UpstreamErrorKind, status: number): string {
  if (kind === 'timeout') return 'upstream_timeout';
  if (kind === 'network') return 'upstream_unreachable';
  return `upstream_http_${status}`;
}

/**
 * Why an upstream call failed, in a few words for a log line: `HTTP 503 model_unavailable` for an
 * answer, else the transport's code from the error's causes (`ECONNREFUSED`, `ENOTFOUND` for DNS,
 * `UND_ERR_CONNECT_TIMEOUT`…; undici's `fetch failed` keeps it in `cause`, a dual-stack connect
 * in an AggregateError's `errors`), with its message; the error's own code or message otherwise.
 */
export function failureCause(err: unknown): string {
  if (err instanceof UpstreamError && err.kind === 'http') {
    return `HTTP ${err.status}${err.upstreamCode ? ` ${err.upstreamCode}` : ''}`;
  }
  if (err instanceof UpstreamError && err.code === 'upstream_circuit_open') return 'circuit open (upstream_circuit_open)';
  const coded = codedCause(err, 0);
  if (coded) return coded.message && coded.message !== coded.code ? `${coded.code} (${coded.message})` : coded.code;
  if (err instanceof ServiceError) return `${err.code}: ${err.message}`;
  return err instanceof Error ? err.message : String(err);
}

/** The first error with a string `code` down `err`'s causes (and an AggregateError's errors), a few levels deep. */
function codedCause(err: unknown, depth: number): { code: string; message?: string } | undefined {
  if (!isRecord(err) && !(err instanceof Error)) return undefined;
  if (depth > 4) return undefined;
  const e = err as { code?: unknown; message?: unknown; cause?: unknown; errors?: unknown };
  // The client's own code (upstream_unreachable) says less than the transport's beneath it.
  const own = typeof e.code === 'string' && !(err instanceof ServiceError) ? e.code : undefined;
  if (own) return { code: own, message: typeof e.message === 'string' ? e.message : undefined };
  for (const next of [e.cause, ...(Array.isArray(e.errors) ? (e.errors as unknown[]) : [])]) {
    const found = codedCause(next, depth + 1);
    if (found) return found;
  }
  return undefined;
}

/** True when `err` is an UpstreamError with this HTTP status (e.g. 404, 402). */
export function isUpstreamStatus(err: unknown, status: number): err is UpstreamError {
  return err instanceof UpstreamError && err.status === status;
}

/** True when `err` is an UpstreamError carrying this upstream `detail.error.code`. */
export function isUpstreamCode(err: unknown, code: string): err is UpstreamError {
  return err instanceof UpstreamError && err.upstreamCode === code;
}

/** Builds the error for a non-2xx answer from its parsed body. */
export function httpError(status: number, body: unknown, retryAfterMs: number | undefined): UpstreamError {
  const { code, message, stream } = describeBody(body);
  return new UpstreamError({
    kind: 'http',
    status,
    body,
    upstreamCode: code,
    retryAfterMs,
    shape: stream ? 'stream' : 'detail',
    message: message ?? `Upstream answered HTTP ${status}`,
  });
}

/**
 * Reads code and message out of the contract's error shapes (stream, detail, validation, legacy);
 * `stream` is true for the nested `{detail: {error: {…}}}` shape. Nothing read: neither is set.
 */
export function describeBody(body: unknown): { code?: string; message?: string; stream: boolean } {
  if (!isRecord(body)) return { stream: false, message: typeof body === 'string' && body ? body.slice(0, 200) : undefined };
  const detail = body.detail;
  if (isRecord(detail) && isRecord(detail.error)) {
    const e = detail.error;
    return { code: str(e.code), message: str(e.message), stream: true };
  }
  if (isRecord(detail) && typeof detail.error === 'string') return { code: detail.error, message: detail.error, stream: false };
  if (typeof detail === 'string') return { message: detail, stream: false };
  if (typeof body.error === 'string') return { code: body.error, message: str(body.message) ?? body.error, stream: false };
  return { stream: false };
}

function str(v: unknown): string | undefined {
  return typeof v === 'string' ? v : undefined;
}

/**
 * One error root for the whole service. A ServiceError carries a status, a stable code and the
 * body shape the contract prescribes for it; each interface (emulator's /v1beta, gateway's
 * /v0.2) renders it in its own shape. Every code is registered in ./error-codes.ts and listed in
 * docs/errors.md (test/lib/error-codes.unit.test.ts keeps the three in step).
 */

export interface ValidationDetail {
  loc: string[];
  msg: string;
  type: string;
}

/**
 * Body shapes from spec/interface.md "Errors":
 * - `detail`: `{detail: message}`
 * - `stream`: `{detail: {error: {message, type, code, upstream?}}}`
 * - `validation`: `{error: 'validation_error', message, details}`
 * - `region`: `{detail: {error: 'region_error', expected_region, requested_region}}`
 * - `legacy`: `{error: code, message, request_id, details}`
 */
export type ErrorShape = 'detail' | 'stream' | 'validation' | 'region' | 'legacy';

export interface ServiceErrorOptions {
  shape?: ErrorShape;
  /** `type` of a stream-shaped error (default `stream_error`). */
  type?: string;
  details?: ValidationDetail[] | unknown;
  /** Upstream details of a stream-shaped error. */
  upstream?: { provider: string; status: number; body: object; rate_limits: object };
  /** Extra top-level fields (region errors). */
  extra?: Record<string, unknown>;
  /** Response headers to add (e.g. retry-after). */
  headers?: Record<string, string>;
  cause?: unknown;
  /** Fields for the access line of the response (never in its body), e.g. the model a refusal names. */
  log?: Record<string, unknown>;
}

export class ServiceError extends Error {
  override name = 'ServiceError';
  readonly shape: ErrorShape;

  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly options: ServiceErrorOptions = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.shape = options.shape ?? 'detail';
  }

  /** Renders the body in this error's own shape (the /v1beta renderer). */
  toBody(requestId?: string | null): unknown {
    switch (this.shape) {
      case 'stream':
        return {
          detail: {
            error: {
              message: this.message,
              type: this.options.type ?? 'stream_error',
              code: this.code,
              ...(this.options.upstream ? { upstream: this.options.upstream } : {}),
            },
          },
        };
      case 'validation':
        return { error: 'validation_error', message: this.message, details: this.options.details ?? [] };
      case 'region':
        return { detail: { error: 'region_error', ...this.options.extra } };
      case 'legacy':
        return this.toLegacyBody(requestId ?? null);
      case 'detail':
      default:
        return { detail: this.message };
    }
  }

  /** The legacy `/v0.2` body: `{error, message, request_id, details}`. */
  toLegacyBody(requestId: string | null): unknown {
    return { error: this.code, message: this.message, request_id: requestId, details: this.options.details ?? null };
  }
}

export const validationError = (message: string, details: ValidationDetail[]): ServiceError =>
  new ServiceError(422, 'validation_error', message, { shape: 'validation', details });

export const streamError = (status: number, code: string, message: string, type = 'stream_error'): ServiceError =>
  new ServiceError(status, code, message, { shape: 'stream', type });

export const detailError = (status: number, code: string, message: string): ServiceError =>
  new ServiceError(status, code, message, { shape: 'detail' });

/** Maps body-parser and other framework errors to ServiceErrors so bad input never becomes a 500. */
export function fromFrameworkError(err: unknown): ServiceError | undefined {
  if (err instanceof ServiceError) return err;
  const e = err as { type?: string; status?: number; statusCode?: number; message?: string };
  const status = e?.status ?? e?.statusCode;
  switch (e?.type) {
    case 'entity.parse.failed':
      return detailError(400, 'invalid_json', `Request body is not valid JSON: ${e.message ?? ''}`.trim());
    case 'entity.too.large':
      return detailError(413, 'payload_too_large', 'Request body is too large');
    case 'encoding.unsupported':
    case 'charset.unsupported':
      return detailError(415, 'unsupported_encoding', e.message ?? 'Unsupported encoding');
    case 'request.aborted':
      return detailError(400, 'request_aborted', 'Request aborted');
    default:
      if (typeof status === 'number' && status >= 400 && status < 500) {
        return detailError(status, 'bad_request', e.message ?? 'Bad request');
      }
      return undefined;
  }
}

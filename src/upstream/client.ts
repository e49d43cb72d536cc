/**
 * Typed client of the /v1beta + /billing upstream, on one keep-alive undici Agent shared by every
 * call (the gateway drives ~1,000 completions a second through it). Every failure becomes an
 * UpstreamError; retries follow the one policy in ./retry.
 */
import { Agent } from 'undici';
import type { Dispatcher } from 'undici';
import type { Brand } from '../brand';
import { keyHash } from '../lib/keys';
import { ServiceError, detailError } from '../lib/errors';
import type { Logger } from '../lib/logger';
import { activeSpanContext, childTraceparent } from '../lib/spans';
import { UpstreamError, httpError, isUpstreamCode, isUpstreamStatus } from './errors';
import { CircuitBreaker } from './breaker';
import type { BreakerOptions } from './breaker';
import { Retrier, isRetryable, retryHintMs, sleep } from './retry';
import type { RetryInfo, RetryOverride, RetryPolicyName } from './retry';
import type {
  Balance,
  CacheInfo,
  ChatCompletionRequest,
  ChatCompletionResponse,
  CreateStreamResponse,
  DeleteStreamResult,
  KeepaliveResponse,
  ModelList,
  ModelPricing,
  Stream,
  ViewerTokenResponse,
} from './types';
import { isRecord } from '../lib/is-record';

export { UpstreamError, failureCause, isUpstreamStatus, isUpstreamCode } from './errors';
export type { UpstreamErrorKind } from './errors';
export type * from './types';

export interface UpstreamTimeouts {
  /** TCP (and TLS) connect. */
  connectMs: number;
  /** From sending the request to the complete response headers. */
  headersMs: number;
  /** Longest silence between two body chunks. */
  bodyMs: number;
}

export const DEFAULT_TIMEOUTS: Readonly<UpstreamTimeouts> = { connectMs: 5_000, headersMs: 30_000, bodyMs: 30_000 };
export const DEFAULT_CONNECTIONS = 128;

export interface UpstreamClientOptions {
  /** e.g. `http://127.0.0.1:8081`; a path prefix is kept. */
  baseUrl: string;
  brand: Brand;
  timeouts?: Partial<UpstreamTimeouts>;
  /** Shrinks the retry schedule (tests) or supplies a configured Retrier. */
  retry?: RetryOverride | Retrier;
  logger?: Logger;
  /** Keep-alive connections to the upstream origin. Default 128. */
  connections?: number;
  /** Region header sent on every call that gives none. */
  region?: string;
  /** The circuit breaker of this upstream (default: off). */
  breaker?: Omit<BreakerOptions, 'onChange'>;
}

export interface CallOptions {
  signal?: AbortSignal;
  /** Value of the `X-<Brand>-Region` header for this call. */
  region?: string;
  /** Per-call headers and body timeouts (connect is fixed per client). */
  timeouts?: Partial<Omit<UpstreamTimeouts, 'connectMs'>>;
  /** Sent as `x-request-id`: the legacy request or session this call is made for. */
  requestId?: string;
  /**
   * Trace id (32 hex) of that request or session: a call made outside any span (tracing off, or a
   * stream's background poll) gets its own `traceparent` span in it. Inside a span the undici
   * instrumentation writes the `traceparent` of the call's own client span instead.
   */
  traceId?: string;
}

export interface AttemptInfo {
  model: string;
  /** 1-based attempt number for this model. */
  attempt: number;
  /** 1-based attempt number across all models. */
  totalAttempts: number;
}

export interface CompletionOptions extends CallOptions {
  /** Tried in order after the requested model fails with 503, a network error or `model_unavailable`. */
  fallbackModels?: readonly string[];
  /** Consulted before each fallback model; a model it calls not ready (or whose check throws) is skipped. */
  isModelReady?: (modelId: string) => boolean | Promise<boolean>;
  onAttempt?: (info: AttemptInfo) => void;
}

export interface CompletionResult {
  response: ChatCompletionResponse;
  /** The model that answered (the requested one or a fallback). */
  model: string;
  /** Attempts made across all models. */
  attempts: number;
  fallbackUsed: boolean;
}

type Method = Dispatcher.HttpMethod;

const TIMEOUT_CODES = new Set(['UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'ETIMEDOUT']);
/** undici's own argument errors are bugs or bad input, not transport failures. */
const ARGUMENT_CODES = new Set(['UND_ERR_INVALID_ARG', 'UND_ERR_NOT_SUPPORTED', 'ERR_INVALID_ARG_TYPE', 'ERR_INVALID_CHAR']);

export class UpstreamClient {
  readonly retrier: Retrier;
  private readonly agent: Agent;
  private readonly origin: string;
  private readonly basePath: string;
  private readonly regionHeader: string;
  private readonly defaultRegion: string | undefined;
  private readonly timeouts: UpstreamTimeouts;
  private readonly log: Logger | undefined;
  private readonly breaker: CircuitBreaker | undefined;
  private closed = false;

  constructor(opts: UpstreamClientOptions) {
    const url = new URL(opts.baseUrl);
    if (url.protocol !== 'http:' && url.protocol !== 'https:') {
      throw new TypeError(`upstream baseUrl must be http(s), got ${url.protocol}`);
    }
    this.origin = url.origin;
    this.basePath = url.pathname.replace(/\/+$/, '');
    this.regionHeader = opts.brand.regionHeaderDisplay;
    this.defaultRegion = opts.region;
    this.timeouts = { ...DEFAULT_TIMEOUTS, ...opts.timeouts };
    this.retrier = opts.retry instanceof Retrier ? opts.retry : new Retrier(opts.retry);
    this.log = opts.logger?.child({ component: 'upstream' });
    if (opts.breaker && opts.breaker.threshold > 0) {
      const log = this.log;
      this.breaker = new CircuitBreaker({
        ...opts.breaker,
        onChange: (state) => log?.warn({ state }, 'upstream circuit breaker changed state'),
      });
    }
    this.agent = new Agent({
      connections: opts.connections ?? DEFAULT_CONNECTIONS,
      pipelining: 1,
      connect: { timeout: this.timeouts.connectMs },
      headersTimeout: this.timeouts.headersMs,
      bodyTimeout: this.timeouts.bodyMs,
    });
  }

  /** `POST /v1beta/streams` with `{}`; retried only on 503 (creation is not idempotent). */
  async createStream(apiKey: string, opts: CallOptions = {}): Promise<CreateStreamResponse> {
    const body = await this.withRetry('create', 'createStream', apiKey, opts, () =>
      this.send('POST', '/v1beta/streams', apiKey, '{}', opts),
    );
    return expectObject<CreateStreamResponse>(body, 'createStream');
  }

  async getStream(apiKey: string, id: string, opts: CallOptions = {}): Promise<Stream> {
    const body = await this.send('GET', `/v1beta/streams/${encodeURIComponent(id)}`, apiKey, undefined, opts);
    return expectObject<Stream>(body, 'getStream');
  }

  /** A subscribe-only token for the stream's media room (valid a few minutes); never retried. */
  async viewerToken(apiKey: string, id: string, opts: CallOptions = {}): Promise<ViewerTokenResponse> {
    const body = await this.send('POST', `/v1beta/streams/${encodeURIComponent(id)}/viewer-token`, apiKey, '{}', opts);
    const out = expectObject<ViewerTokenResponse>(body, 'viewerToken');
    if (!isRecord(out.view) || typeof out.view.url !== 'string' || typeof out.view.token !== 'string') {
      throw invalidResponse('viewerToken', 'no view {url, token}');
    }
    return out;
  }

  /** Renews the upstream lease; retried on network errors and 503, then fatal. */
  async keepalive(apiKey: string, id: string, opts: CallOptions = {}): Promise<KeepaliveResponse> {
    const path = `/v1beta/streams/${encodeURIComponent(id)}/keepalive`;
    const body = await this.withRetry('keepalive', 'keepalive', apiKey, opts, () => this.send('POST', path, apiKey, '{}', opts));
    return expectObject<KeepaliveResponse>(body, 'keepalive');
  }

  /**
   * Ends the stream. Delete is idempotent: a 404 means it is already gone, and is not an error;
   * failures of the upstream are retried with backoff (policy `delete`) so no stream is orphaned.
   */
  async deleteStream(apiKey: string, id: string, opts: CallOptions = {}): Promise<DeleteStreamResult> {
    try {
      const path = `/v1beta/streams/${encodeURIComponent(id)}`;
      const body = await this.withRetry('delete', 'deleteStream', apiKey, opts, () => this.send('DELETE', path, apiKey, undefined, opts));
      const streamId = isRecord(body) && typeof body.id === 'string' ? body.id : id;
      return { id: streamId, deleted: true, alreadyGone: false };
    } catch (err) {
      if (isUpstreamStatus(err, 404)) return { id, deleted: true, alreadyGone: true };
      throw err;
    }
  }

  /**
   * One chat completion with the contract's retries, then each ready fallback model with its
   * own retries. Errors that neither retry nor fallback can help (4xx, a broken 2xx) are thrown at once.
   */
  async chatCompletion(apiKey: string, request: ChatCompletionRequest, opts: CompletionOptions = {}): Promise<CompletionResult> {
    if ((request as { stream?: unknown }).stream === true) {
      throw detailError(400, 'stream_not_supported', 'UpstreamClient.chatCompletion serves non-streaming completions only');
    }
    const policy = this.retrier.policy('completion');
    const models = candidateModels(request.model, opts.fallbackModels);
    let totalAttempts = 0;
    let lastError: unknown;
    for (let i = 0; i < models.length; i++) {
      const model = models[i]!;
      if (i > 0) {
        if (opts.isModelReady && !(await this.readySafely(opts.isModelReady, model))) {
          this.log?.debug({ op: 'chatCompletion', model }, 'upstream fallback model not ready, skipped');
          continue;
        }
        // The contract's last wait (2 s) follows the last failed attempt, before the next model.
        if (isRetryable(policy, lastError))
          await sleep(this.retrier.delayMs('completion', policy.maxAttempts ?? policy.delaysMs.length + 1), opts.signal);
        this.log?.warn(
          { op: 'chatCompletion', model, failedModel: models[i - 1], code: codeOf(lastError), key: keyHash(apiKey) },
          'upstream completion falling back to the next model',
        );
      }
      // Serialised once per model, reused by its retries.
      const payload = JSON.stringify(i === 0 ? request : { ...request, model });
      try {
        const body = await this.withRetry('completion', 'chatCompletion', apiKey, opts, (attempt) => {
          totalAttempts++;
          opts.onAttempt?.({ model, attempt, totalAttempts });
          return this.send('POST', '/v1beta/chat/completions', apiKey, payload, opts);
        });
        const response = expectObject<ChatCompletionResponse>(body, 'chatCompletion');
        return { response, model, attempts: totalAttempts, fallbackUsed: i > 0 };
      } catch (err) {
        const canFallBack = isRetryable(policy, err) || isUpstreamCode(err, 'model_unavailable');
        if (!canFallBack || opts.signal?.aborted) throw err;
        lastError = err;
      }
    }
    throw lastError;
  }

  /** `GET /v1beta/models` (no authentication). */
  async listModels(opts: CallOptions = {}): Promise<ModelList> {
    const body = await this.send('GET', '/v1beta/models', undefined, undefined, opts);
    const list = expectObject<ModelList>(body, 'listModels');
    if (!Array.isArray(list.data)) throw invalidResponse('listModels', 'no data array');
    return list;
  }

  async balance(apiKey: string, opts: CallOptions = {}): Promise<Balance> {
    const body = await this.send('GET', '/billing/accounts/me/balance', apiKey, undefined, opts);
    return expectObject<Balance>(body, 'balance');
  }

  /** `GET /billing/pricing/{model}` (no authentication); the model id's slash stays a path separator. */
  async pricing(model: string, opts: CallOptions = {}): Promise<ModelPricing> {
    const path = `/billing/pricing/${model.split('/').map(encodeURIComponent).join('/')}`;
    const body = await this.send('GET', path, undefined, undefined, opts);
    return expectObject<ModelPricing>(body, 'pricing');
  }

  /** `GET /billing/pricing` (no authentication): every public pricing object, as an array. */
  async allPricing(opts: CallOptions = {}): Promise<ModelPricing[]> {
    const body = await this.send('GET', '/billing/pricing', undefined, undefined, opts);
    if (Array.isArray(body)) return body as ModelPricing[];
    if (isRecord(body) && Array.isArray(body.data)) return body.data as ModelPricing[];
    throw invalidResponse('allPricing', 'neither an array nor a list object');
  }

  /** Destroys the agent: in-flight calls fail, later calls are refused. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.agent.destroy();
  }

  private withRetry<T>(
    policy: RetryPolicyName,
    op: string,
    apiKey: string,
    opts: CallOptions,
    attempt: (n: number) => Promise<T>,
  ): Promise<T> {
    const log = this.log;
    const onRetry = log?.isLevelEnabled('debug')
      ? (r: RetryInfo) =>
          log.debug(
            {
              op,
              attempt: r.attempt,
              delayMs: r.delayMs,
              status: r.error.status,
              code: r.error.code,
              kind: r.error.kind,
              key: keyHash(apiKey),
            },
            'upstream call failed, retrying',
          )
      : undefined;
    return this.retrier.run(policy, attempt, { signal: opts.signal, onRetry });
  }

  /** Where calls go (origin and path of the base URL, no credentials): for log lines. */
  get baseUrl(): string {
    return this.origin + this.basePath;
  }

  /** Whether the breaker currently refuses calls (for metrics and health). */
  get circuitState(): string {
    return this.breaker?.state ?? 'closed';
  }

  /** One HTTP exchange through the breaker: the parsed 2xx body, or a thrown UpstreamError. */
  private async send(
    method: Method,
    path: string,
    apiKey: string | undefined,
    body: string | undefined,
    opts: CallOptions,
  ): Promise<unknown> {
    if (this.closed) throw closedError();
    if (!this.breaker) return this.exchange(method, path, apiKey, body, opts);
    // Deletes always go out (their outcome still counts): an orphaned stream costs more than a call.
    if (method !== 'DELETE') this.breaker.admit();
    try {
      const out = await this.exchange(method, path, apiKey, body, opts);
      this.breaker.record();
      return out;
    } catch (err) {
      this.breaker.record(err);
      throw err;
    }
  }

  private async exchange(
    method: Method,
    path: string,
    apiKey: string | undefined,
    body: string | undefined,
    opts: CallOptions,
  ): Promise<unknown> {
    const headers: Record<string, string> = { accept: 'application/json' };
    if (opts.requestId) headers['x-request-id'] = opts.requestId;
    if (opts.traceId && !activeSpanContext()) headers.traceparent = childTraceparent(opts.traceId);
    if (apiKey !== undefined) headers.authorization = `Bearer ${apiKey}`;
    if (body !== undefined) headers['content-type'] = 'application/json';
    const region = opts.region ?? this.defaultRegion;
    if (region) headers[this.regionHeader] = region;

    let res: Dispatcher.ResponseData;
    try {
      res = await this.agent.request({
        origin: this.origin,
        path: this.basePath + path,
        method,
        headers,
        body,
        signal: opts.signal,
        headersTimeout: opts.timeouts?.headersMs ?? this.timeouts.headersMs,
        bodyTimeout: opts.timeouts?.bodyMs ?? this.timeouts.bodyMs,
      });
    } catch (err) {
      throw this.transportError(err, opts.signal, false);
    }

    const status = res.statusCode;
    const ok = status >= 200 && status < 300;
    let text = '';
    try {
      text = await res.body.text();
    } catch (err) {
      // A 2xx whose body broke off: the upstream did the work, so this must not be retried.
      if (ok || opts.signal?.aborted) throw this.transportError(err, opts.signal, true);
    }
    if (!ok) {
      const retryAfterMs = retryHintMs(res.headers);
      throw httpError(status, parseLenient(text), retryAfterMs);
    }
    if (text === '') return undefined;
    try {
      return JSON.parse(text) as unknown;
    } catch {
      throw invalidResponse(path, 'body is not JSON', text.slice(0, 200));
    }
  }

  private transportError(err: unknown, signal: AbortSignal | undefined, bodyStarted: boolean): unknown {
    if (signal?.aborted) return signal.reason;
    if (this.closed) return closedError(err);
    const e = err as { code?: string; message?: string };
    if (e?.code && ARGUMENT_CODES.has(e.code)) {
      return new ServiceError(500, 'upstream_request_invalid', `Upstream request could not be built: ${e.message}`, { cause: err });
    }
    const timeout = e?.code !== undefined && TIMEOUT_CODES.has(e.code);
    return new UpstreamError({
      kind: timeout ? 'timeout' : 'network',
      status: timeout ? 504 : 502,
      message: `Upstream ${timeout ? 'timed out' : 'unreachable'}: ${e?.message ?? String(err)}`,
      bodyStarted,
      cause: err,
    });
  }

  private async readySafely(isModelReady: (id: string) => boolean | Promise<boolean>, model: string): Promise<boolean> {
    try {
      return await isModelReady(model);
    } catch (err) {
      this.log?.debug({ op: 'chatCompletion', model, err: (err as Error)?.message }, 'model readiness check failed');
      return false;
    }
  }
}

/** The cache details of a completion, read from its brand-named field (e.g. `svc.cache`). */
export function cacheInfo(response: ChatCompletionResponse, brand: Brand): CacheInfo | undefined {
  const field = response[brand.responseField];
  if (!isRecord(field) || !isRecord(field.cache)) return undefined;
  return field.cache as unknown as CacheInfo;
}

function candidateModels(primary: string, fallbacks: readonly string[] = []): string[] {
  const out = [primary];
  for (const m of fallbacks) if (!out.includes(m)) out.push(m);
  return out;
}

function parseLenient(text: string): unknown {
  if (text === '') return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

function expectObject<T>(body: unknown, op: string): T {
  if (!isRecord(body)) throw invalidResponse(op, 'expected a JSON object');
  return body as T;
}

function invalidResponse(op: string, why: string, body?: unknown): UpstreamError {
  return new UpstreamError({
    kind: 'http',
    status: 502,
    code: 'upstream_invalid_response',
    message: `Upstream answered ${op} with an unusable body: ${why}`,
    body,
    bodyStarted: true,
  });
}

function closedError(cause?: unknown): ServiceError {
  return new ServiceError(503, 'upstream_client_closed', 'Upstream client is closed', { cause });
}

function codeOf(err: unknown): string | undefined {
  return err instanceof ServiceError ? err.code : undefined;
}

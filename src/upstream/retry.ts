/**
 * The one retry policy of the upstream client (spec/interface.md "Client retry guidance").
 *
 * Each policy lists the waits *before each retry*: `create` waits 1 s, 2 s, 4 s, so a call makes
 * one initial attempt plus at most three retries (four attempts in all). `completion` counts as the
 * contract does, "0.5 s, 1 s, 2 s; 3 attempts, then fall back": three attempts in all, the waits
 * after each failed one, the last (2 s) before the next model (UpstreamClient.chatCompletion). Waits are jittered by
 * ±10 %, raised to an upstream `retry-after` hint (capped), and end early when the caller aborts.
 * A failure after a 2xx answer's body has started is never retried (openai-node, undici
 * retry-handler): the caller may already hold part of it, and the upstream already did the work.
 */
import { UpstreamError } from './errors';

export type RetryPolicyName = 'create' | 'keepalive' | 'completion' | 'delete' | 'none';

export interface RetryPolicy {
  readonly name: RetryPolicyName;
  /** Wait in ms before retry n (index 0 = first retry); its length is the number of retries. */
  readonly delaysMs: readonly number[];
  /** HTTP statuses that are retried. */
  readonly statuses: readonly number[];
  /** Retry when no answer came (connection refused or reset, socket destroyed after sending). */
  readonly network: boolean;
  /** Retry when a connect, headers or body timeout fired. */
  readonly timeout: boolean;
  /** Attempts in all, when fewer than one plus the retries `delaysMs` lists. */
  readonly maxAttempts?: number;
}

/**
 * The contract's policies. Creation is not idempotent and has no idempotency key: only a 503
 * answer proves the earlier attempt failed, so a timeout or a lost socket is never retried.
 */
export const RETRY_POLICIES: Readonly<Record<RetryPolicyName, RetryPolicy>> = {
  create: { name: 'create', delaysMs: [1000, 2000, 4000], statuses: [503], network: false, timeout: false },
  keepalive: { name: 'keepalive', delaysMs: [1000, 1000, 1000], statuses: [503], network: true, timeout: true },
  completion: { name: 'completion', delaysMs: [500, 1000, 2000], statuses: [503], network: true, timeout: true, maxAttempts: 3 },
  /** Delete is idempotent (404 = already gone): retried with backoff so no upstream stream is orphaned. */
  delete: { name: 'delete', delaysMs: [1000, 2000, 4000, 8000], statuses: [429, 500, 502, 503, 504], network: true, timeout: true },
  none: { name: 'none', delaysMs: [], statuses: [], network: false, timeout: false },
};

/** Shrinks or replaces the schedule (tests), and tunes the retry-after cap and the jitter. */
export interface RetryOverride {
  /** Multiplies every scheduled wait: 0.01 turns 1 s into 10 ms. Default 1. */
  scale?: number;
  /** Explicit waits for some policies (ms, before scaling); the length sets the retry count. */
  delaysMs?: Partial<Record<RetryPolicyName, readonly number[]>>;
  /** Longest `retry-after` honoured, in ms (not scaled). Default 10 000. */
  retryAfterCapMs?: number;
  /** Jitter fraction: a wait lands in [w·(1-j), w·(1+j)]. Default 0.1. */
  jitter?: number;
}

export interface RetryInfo {
  policy: RetryPolicyName;
  /** Number of the attempt that failed (1 = the initial one). */
  attempt: number;
  delayMs: number;
  error: UpstreamError;
}

export interface RunOptions {
  signal?: AbortSignal;
  /** Called before each wait; for logging and metrics. */
  onRetry?: (info: RetryInfo) => void;
}

export const DEFAULT_RETRY_AFTER_CAP_MS = 10_000;
const DEFAULT_JITTER = 0.1;

export class Retrier {
  private readonly policies: Record<RetryPolicyName, RetryPolicy>;
  private readonly retryAfterCapMs: number;
  private readonly jitter: number;

  constructor(
    override: RetryOverride = {},
    private readonly random: () => number = Math.random,
  ) {
    const scale = override.scale ?? 1;
    if (!(scale >= 0)) throw new RangeError('retry scale must be >= 0');
    this.retryAfterCapMs = override.retryAfterCapMs ?? DEFAULT_RETRY_AFTER_CAP_MS;
    this.jitter = Math.min(Math.max(override.jitter ?? DEFAULT_JITTER, 0), 1);
    const resolve = (p: RetryPolicy): RetryPolicy => ({
      ...p,
      delaysMs: (override.delaysMs?.[p.name] ?? p.delaysMs).map((d) => Math.max(0, d * scale)),
    });
    this.policies = {
      create: resolve(RETRY_POLICIES.create),
      keepalive: resolve(RETRY_POLICIES.keepalive),
      completion: resolve(RETRY_POLICIES.completion),
      delete: resolve(RETRY_POLICIES.delete),
      none: resolve(RETRY_POLICIES.none),
    };
  }

  policy(name: RetryPolicyName): RetryPolicy {
    return this.policies[name];
  }

  /** Whether `err`, after `attempt` attempts (1-based), earns another one under this policy. */
  shouldRetry(name: RetryPolicyName, err: unknown, attempt: number): err is UpstreamError {
    const p = this.policies[name];
    return attempt <= p.delaysMs.length && attempt < (p.maxAttempts ?? Infinity) && isRetryable(p, err);
  }

  /** Wait before the retry that follows failed attempt `attempt` (1-based). */
  delayMs(name: RetryPolicyName, attempt: number, retryAfterMs?: number): number {
    const base = this.policies[name].delaysMs[attempt - 1] ?? 0;
    const jittered = base * (1 + this.jitter * (2 * this.random() - 1));
    const hinted = retryAfterMs === undefined ? 0 : Math.min(Math.max(retryAfterMs, 0), this.retryAfterCapMs);
    return Math.round(Math.max(jittered, hinted));
  }

  /**
   * Runs `attempt` (given its 1-based number) until it succeeds, fails for good, or the signal
   * aborts. An abort rejects with the signal's reason, also in the middle of a wait.
   */
  async run<T>(name: RetryPolicyName, attempt: (n: number) => Promise<T>, opts: RunOptions = {}): Promise<T> {
    const { signal } = opts;
    for (let n = 1; ; n++) {
      signal?.throwIfAborted();
      try {
        return await attempt(n);
      } catch (err) {
        if (signal?.aborted) throw signal.reason;
        if (!this.shouldRetry(name, err, n)) throw err;
        const delayMs = this.delayMs(name, n, err.retryAfterMs);
        opts.onRetry?.({ policy: name, attempt: n, delayMs, error: err });
        await sleep(delayMs, signal);
      }
    }
  }
}

/** The policy's verdict on one failure, regardless of how many attempts were made. */
export function isRetryable(policy: RetryPolicy, err: unknown): err is UpstreamError {
  // An open circuit already knows the upstream is down: retrying it only burns the wait.
  if (!(err instanceof UpstreamError) || err.bodyStarted || err.code === 'upstream_circuit_open') return false;
  switch (err.kind) {
    case 'http':
      return policy.statuses.includes(err.status);
    case 'network':
      return policy.network;
    case 'timeout':
      return policy.timeout;
    default:
      return false;
  }
}

/**
 * Parses `retry-after` (delay seconds or an HTTP date) and the non-standard `retry-after-ms`
 * into ms from `now`; undefined when absent or unreadable.
 */
export function parseRetryAfter(
  retryAfter: string | string[] | undefined,
  retryAfterMs?: string | string[] | undefined,
  now: number = Date.now(),
): number | undefined {
  const ms = first(retryAfterMs);
  if (ms !== undefined && /^\d+(\.\d+)?$/.test(ms.trim())) return Math.round(Number(ms));
  const value = first(retryAfter)?.trim();
  if (!value) return undefined;
  if (/^\d+(\.\d+)?$/.test(value)) return Math.round(Number(value) * 1000);
  // An HTTP date always names its day and month; this keeps Date.parse off strings like "-1".
  const at = /[a-z]{3}/i.test(value) ? Date.parse(value) : Number.NaN;
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

/**
 * The wait an error answer hints: `retry-after` (or `retry-after-ms`), and, when
 * `x-ratelimit-remaining` is 0, until `x-ratelimit-reset` (epoch seconds, as the provider sends
 * it); the later of the two. Undefined when neither says.
 */
export function retryHintMs(headers: Record<string, string | string[] | undefined>, now: number = Date.now()): number | undefined {
  const after = parseRetryAfter(headers['retry-after'], headers['retry-after-ms'], now);
  const remaining = first(headers['x-ratelimit-remaining'])?.trim();
  const reset = first(headers['x-ratelimit-reset'])?.trim();
  const resetMs =
    remaining === '0' && reset && /^\d+(\.\d+)?$/.test(reset) ? Math.max(0, Math.round(Number(reset) * 1000 - now)) : undefined;
  if (after === undefined) return resetMs;
  return resetMs === undefined ? after : Math.max(after, resetMs);
}

function first(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v;
}

/** setTimeout as a promise that rejects with the signal's reason as soon as it aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

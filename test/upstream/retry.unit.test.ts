import { UpstreamError } from '../../src/upstream/errors';
import { RETRY_POLICIES, Retrier, isRetryable, parseRetryAfter, retryHintMs, sleep } from '../../src/upstream/retry';
import type { RetryPolicyName } from '../../src/upstream/retry';

const http = (status: number, extra: Partial<ConstructorParameters<typeof UpstreamError>[0]> = {}) =>
  new UpstreamError({ kind: 'http', status, message: `http ${status}`, ...extra });
const network = (extra: { bodyStarted?: boolean } = {}) =>
  new UpstreamError({ kind: 'network', status: 502, message: 'socket hang up', ...extra });
const timeout = () => new UpstreamError({ kind: 'timeout', status: 504, message: 'headers timeout' });

describe('retry policies', () => {
  it('carry the contract schedule: waits before each of three retries', () => {
    const r = new Retrier({ jitter: 0 });
    expect(r.policy('create').delaysMs).toEqual([1000, 2000, 4000]);
    expect(r.policy('keepalive').delaysMs).toEqual([1000, 1000, 1000]);
    expect(r.policy('completion').delaysMs).toEqual([500, 1000, 2000]);
    expect(r.policy('none').delaysMs).toEqual([]);
    expect([1, 2, 3].map((n) => r.delayMs('create', n))).toEqual([1000, 2000, 4000]);
  });

  it.each<[RetryPolicyName, UpstreamError, boolean]>([
    ['create', http(503), true],
    ['create', network(), false],
    ['create', timeout(), false],
    ['create', http(500), false],
    ['create', http(502), false],
    ['create', http(402), false],
    ['keepalive', network(), true],
    ['keepalive', timeout(), true],
    ['keepalive', http(503), true],
    ['keepalive', http(404), false],
    ['keepalive', http(500), false],
    ['completion', http(503), true],
    ['completion', network(), true],
    ['completion', timeout(), true],
    ['completion', http(422), false],
    ['completion', http(429), false],
    ['completion', network({ bodyStarted: true }), false],
    ['completion', http(503, { bodyStarted: true }), false],
    ['none', http(503), false],
    ['none', network(), false],
  ])('%s: %p retryable = %p', (name, err, expected) => {
    expect(isRetryable(RETRY_POLICIES[name], err)).toBe(expected);
  });

  it('never retries errors that are not UpstreamErrors', () => {
    expect(isRetryable(RETRY_POLICIES.keepalive, new Error('boom'))).toBe(false);
    expect(isRetryable(RETRY_POLICIES.keepalive, { kind: 'network', status: 502 })).toBe(false);
  });

  it('scales or replaces the schedule', () => {
    const scaled = new Retrier({ scale: 0.01, jitter: 0 });
    expect(scaled.policy('create').delaysMs).toEqual([10, 20, 40]);
    const explicit = new Retrier({ delaysMs: { keepalive: [1, 2] }, jitter: 0 });
    expect(explicit.policy('keepalive').delaysMs).toEqual([1, 2]);
    expect(explicit.policy('create').delaysMs).toEqual([1000, 2000, 4000]);
    expect(explicit.shouldRetry('keepalive', network(), 2)).toBe(true);
    expect(explicit.shouldRetry('keepalive', network(), 3)).toBe(false);
    expect(() => new Retrier({ scale: -1 })).toThrow(RangeError);
  });

  it('jitters by at most ±10 %', () => {
    expect(new Retrier({}, () => 0).delayMs('keepalive', 1)).toBe(900);
    expect(new Retrier({}, () => 1).delayMs('keepalive', 1)).toBe(1100);
    expect(new Retrier({}, () => 0.5).delayMs('keepalive', 1)).toBe(1000);
    const r = new Retrier();
    for (let i = 0; i < 200; i++) {
      const d = r.delayMs('completion', 1);
      expect(d).toBeGreaterThanOrEqual(450);
      expect(d).toBeLessThanOrEqual(550);
    }
  });

  it('waits at least retry-after, capped', () => {
    const r = new Retrier({ scale: 0.001, jitter: 0, retryAfterCapMs: 5000 });
    expect(r.delayMs('completion', 1)).toBe(1);
    expect(r.delayMs('completion', 1, 3000)).toBe(3000);
    expect(r.delayMs('completion', 1, 60_000)).toBe(5000);
    expect(new Retrier({ jitter: 0 }).delayMs('create', 3, 1000)).toBe(4000);
    expect(new Retrier({ jitter: 0 }).delayMs('create', 1, 60_000)).toBe(10_000);
  });
});

describe('parseRetryAfter', () => {
  const now = Date.parse('2026-01-01T00:00:00Z');
  it('reads seconds, HTTP dates and retry-after-ms', () => {
    expect(parseRetryAfter('2')).toBe(2000);
    expect(parseRetryAfter('0.5')).toBe(500);
    expect(parseRetryAfter(['3'])).toBe(3000);
    expect(parseRetryAfter('Thu, 01 Jan 2026 00:00:04 GMT', undefined, now)).toBe(4000);
    expect(parseRetryAfter('Wed, 31 Dec 2025 23:59:00 GMT', undefined, now)).toBe(0);
    expect(parseRetryAfter('1', '250')).toBe(250);
  });
  it('ignores absent or unreadable values', () => {
    expect(parseRetryAfter(undefined)).toBeUndefined();
    expect(parseRetryAfter('')).toBeUndefined();
    expect(parseRetryAfter('soon')).toBeUndefined();
    expect(parseRetryAfter('-1')).toBeUndefined();
    expect(parseRetryAfter(undefined, 'abc')).toBeUndefined();
  });
});

describe('retryHintMs', () => {
  const now = Date.parse('2026-01-01T00:00:00Z');
  const reset = (s: number) => String(now / 1000 + s);
  it('reads x-ratelimit-reset (epoch seconds) once nothing remains, and takes the later of it and retry-after', () => {
    expect(retryHintMs({ 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': reset(2.5) }, now)).toBe(2500);
    expect(retryHintMs({ 'retry-after': '1', 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': reset(3) }, now)).toBe(3000);
    expect(retryHintMs({ 'retry-after': '4', 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': reset(3) }, now)).toBe(4000);
    expect(retryHintMs({ 'retry-after': '1' }, now)).toBe(1000);
  });
  it('ignores a reset while requests remain, a reset in the past waits 0, nothing hinted is undefined', () => {
    expect(retryHintMs({ 'x-ratelimit-remaining': '3', 'x-ratelimit-reset': reset(5) }, now)).toBeUndefined();
    expect(retryHintMs({ 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': reset(-5) }, now)).toBe(0);
    expect(retryHintMs({ 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': 'soon' }, now)).toBeUndefined();
    expect(retryHintMs({}, now)).toBeUndefined();
  });
});

describe('Retrier.run', () => {
  it('makes one attempt plus one per scheduled wait, then rethrows the last error', async () => {
    const r = new Retrier({ scale: 0.001 });
    const seen: number[] = [];
    const retries: number[] = [];
    await expect(
      r.run(
        'keepalive',
        async (n) => {
          seen.push(n);
          throw network();
        },
        { onRetry: (i) => retries.push(i.attempt) },
      ),
    ).rejects.toMatchObject({ kind: 'network' });
    expect(seen).toEqual([1, 2, 3, 4]);
    expect(retries).toEqual([1, 2, 3]);
  });

  it('completion counts as the contract does: 3 attempts in all (waits 0.5 s, 1 s), the 2 s wait left for the next model', async () => {
    const r = new Retrier({ scale: 0.001 });
    const seen: number[] = [];
    await expect(
      r.run('completion', async (n) => {
        seen.push(n);
        throw http(503);
      }),
    ).rejects.toMatchObject({ status: 503 });
    expect(seen).toEqual([1, 2, 3]);
    const exact = new Retrier({ jitter: 0 });
    expect([1, 2, 3].map((n) => exact.delayMs('completion', n))).toEqual([500, 1000, 2000]);
    expect([1, 2, 3].map((n) => exact.shouldRetry('completion', http(503), n))).toEqual([true, true, false]);
  });

  it('returns the first success and stops at a non-retryable error', async () => {
    const r = new Retrier({ scale: 0.001 });
    let n = 0;
    await expect(r.run('create', async () => (++n < 3 ? Promise.reject(http(503)) : 'third'))).resolves.toBe('third');
    n = 0;
    await expect(
      r.run('create', async () => {
        n++;
        throw http(401);
      }),
    ).rejects.toMatchObject({ status: 401 });
    expect(n).toBe(1);
  });

  it('stops a wait as soon as the signal aborts', async () => {
    // Fake timers: the wait never ends by itself, so only the abort can settle the run.
    jest.useFakeTimers();
    try {
      const r = new Retrier({ delaysMs: { completion: [10_000] } });
      const ac = new AbortController();
      let attempts = 0;
      let began!: () => void;
      const waitBegan = new Promise<void>((resolve) => (began = resolve));
      const run = r.run(
        'completion',
        async () => {
          attempts++;
          throw http(503);
        },
        { signal: ac.signal, onRetry: () => began() },
      );
      const settled = expect(run).rejects.toThrow('stream ended');
      await waitBegan; // onRetry ran; the wait's timer is armed right after it
      expect(jest.getTimerCount()).toBe(1);
      ac.abort(new Error('stream ended'));
      await settled;
      expect(attempts).toBe(1);
      expect(jest.getTimerCount()).toBe(0); // the wait's timer went with the abort
    } finally {
      jest.useRealTimers();
    }
  });

  it('does not start when already aborted', async () => {
    const ac = new AbortController();
    ac.abort(new Error('gone'));
    const fn = jest.fn(async () => 'x');
    await expect(new Retrier().run('none', fn, { signal: ac.signal })).rejects.toThrow('gone');
    expect(fn).not.toHaveBeenCalled();
  });
});

describe('sleep', () => {
  it('resolves after the time, or rejects with the abort reason', async () => {
    const t0 = performance.now();
    await sleep(30);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(25);
    const ac = new AbortController();
    const p = sleep(10_000, ac.signal);
    ac.abort(new Error('stop'));
    await expect(p).rejects.toThrow('stop');
  });
});

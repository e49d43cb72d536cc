import {
  DEFAULT_RATE_LIMIT_WAIT_MS,
  MAX_RATE_LIMIT_WAIT_MS,
  RESUME_SPREAD_MS,
  RateLimitBackoff,
} from '../../../src/gateway/legacy/streams/rate-limit-backoff';

describe('RateLimitBackoff', () => {
  const T = 1_000_000;

  it('holds every stream of the limited key until the hinted time, not other keys', () => {
    const b = new RateLimitBackoff();
    expect(b.limited('k1', T, 2000)).toBe(T + 2000);
    expect(b.holds('k1', T + 1999, 0)).toBe(true);
    expect(b.holds('k2', T + 1, 0)).toBe(false);
    expect(b.holds('k1', T + 2000, 0)).toBe(false);
  });

  it('resumes each stream at its own point of the spread after the hold', () => {
    const b = new RateLimitBackoff();
    b.limited('k', T, 1000);
    const resumesAt = (jitter: number) => {
      for (let t = T; t < T + 1000 + RESUME_SPREAD_MS + 10; t += 10) if (!b.holds('k', t, jitter)) return t - T;
      return -1;
    };
    expect([resumesAt(0), resumesAt(0.5), resumesAt(0.99)]).toEqual([
      1000,
      1000 + RESUME_SPREAD_MS / 2,
      1000 + Math.ceil((RESUME_SPREAD_MS * 0.99) / 10) * 10,
    ]);
  });

  it('no hint waits the default; a huge hint is capped; a later 429 extends, an earlier one never shortens', () => {
    const b = new RateLimitBackoff();
    expect(b.limited('a', T, undefined)).toBe(T + DEFAULT_RATE_LIMIT_WAIT_MS);
    expect(b.limited('b', T, 10 * MAX_RATE_LIMIT_WAIT_MS)).toBe(T + MAX_RATE_LIMIT_WAIT_MS);
    expect(b.limited('a', T + 500, 3000)).toBe(T + 3500);
    expect(b.limited('a', T + 600, 100)).toBe(T + 3500);
  });

  it('jitter comes from the injected source', () => {
    const draws = [0.25, 0.75];
    const b = new RateLimitBackoff(() => draws.shift()!);
    expect([b.jitter(), b.jitter()]).toEqual([0.25, 0.75]);
  });
});

/**
 * The failed-authentication budget on an injected clock: per client address and minute, and never
 * in the way of a key accepted in the last 5 minutes (which loses that waiver once refused again).
 */
import { FailedAuthLimiter } from '../../../src/gateway/legacy/http/auth-failures';
import { NegativeKeyCache } from '../../../src/gateway/legacy/streams/catalog';
import { FakeClock } from '../../helpers/fake-clock';

function limiter(perMinute = 3) {
  const clock = new FakeClock(1_000_000);
  const over: string[] = [];
  const l = new FailedAuthLimiter({ perMinute, clock, onOverBudget: (ip) => over.push(ip) });
  return { l, over, advance: (ms: number) => clock.advance(ms) };
}
const failTimes = (l: FailedAuthLimiter, ip: string, n: number) => {
  for (let i = 0; i < n; i++) l.fail(ip);
};

test('an address over its budget is refused until its minute ends; other addresses are not', () => {
  const { l, over, advance } = limiter(3);
  failTimes(l, 'a', 2);
  expect(l.blockedForMs('a')).toBe(0);
  l.fail('a');
  expect(over).toEqual(['a']);
  advance(20_000);
  expect(l.blockedForMs('a', 'svc-unknown')).toBe(40_000);
  expect(l.blockedForMs('b', 'svc-unknown')).toBe(0);
  failTimes(l, 'a', 5);
  expect(over).toEqual(['a']);
  advance(40_000);
  expect(l.blockedForMs('a')).toBe(0);
});

test('a key accepted recently passes an over-budget address; unknown keys and no key do not', () => {
  const { l, advance } = limiter(3);
  l.accept('svc-good');
  failTimes(l, 'balancer', 3);
  expect(l.blockedForMs('balancer', 'svc-good')).toBe(0);
  expect(l.blockedForMs('balancer', 'svc-other')).toBeGreaterThan(0);
  expect(l.blockedForMs('balancer')).toBeGreaterThan(0);
  // The waiver lasts 5 minutes from the latest acceptance.
  advance(4 * 60_000);
  l.accept('svc-good');
  advance(4 * 60_000);
  failTimes(l, 'balancer', 3);
  expect(l.blockedForMs('balancer', 'svc-good')).toBe(0);
  advance(60_001);
  failTimes(l, 'balancer', 3);
  expect(l.blockedForMs('balancer', 'svc-good')).toBeGreaterThan(0);
});

test('a key refused again (revoked) loses its waiver at once', () => {
  const { l } = limiter(3);
  l.accept('svc-revoked');
  failTimes(l, 'a', 3);
  expect(l.blockedForMs('a', 'svc-revoked')).toBe(0);
  l.fail('a', 'svc-revoked');
  expect(l.blockedForMs('a', 'svc-revoked')).toBeGreaterThan(0);
  expect(l.acceptedCount).toBe(0);
});

test('no limit (0): nothing refused, nothing remembered', () => {
  const { l } = limiter(0);
  l.accept('svc-good');
  failTimes(l, 'a', 100);
  expect(l.blockedForMs('a', 'svc-bad')).toBe(0);
  expect(l.acceptedCount).toBe(0);
});

test('the accepted keys are bounded (least recent forgotten) and held by hash only', () => {
  const { l } = limiter(1);
  for (let i = 0; i < 10_050; i++) l.accept(`svc-key-${i}`);
  expect(l.acceptedCount).toBe(10_000);
  l.fail('a');
  expect(l.blockedForMs('a', 'svc-key-0')).toBeGreaterThan(0);
  expect(l.blockedForMs('a', 'svc-key-10049')).toBe(0);
  expect(JSON.stringify([...(l as unknown as { accepted: Map<string, unknown> }).accepted.keys()])).not.toContain('svc-key');
});

test('the negative cache forgets after its TTL and is off at 0', () => {
  const clock = new FakeClock(0);
  const c = new NegativeKeyCache(10_000, 2, clock);
  c.add('h1');
  clock.advance(10_000);
  expect(c.has('h1')).toBe(true);
  clock.advance(1);
  expect(c.has('h1')).toBe(false);
  c.add('h1');
  c.add('h2');
  c.add('h3');
  expect(c.size).toBe(2);
  const off = new NegativeKeyCache(0, 10);
  off.add('h1');
  expect(off.has('h1')).toBe(false);
});

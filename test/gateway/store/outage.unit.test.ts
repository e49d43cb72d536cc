/** StoreHealth on a fake clock: outages from store call outcomes, and which leases may end. */
import { StoreHealth } from '../../../src/gateway/store/outage';
import { FakeClock } from '../../helpers/fake-clock';

const TTL = 60_000;

test('an outage runs from the first failure to the next success; repeats do not move it', () => {
  const clock = new FakeClock(0);
  const health = new StoreHealth({ clock });
  expect(health.downSinceMs).toBeNull();
  expect(health.lastOutage).toBeUndefined();
  health.call('getRecord', 0.001, false);
  clock.advance(1_000);
  health.call('commitTick', 2, true);
  clock.advance(500);
  health.call('renewLease', 2, true);
  expect(health.downSinceMs).toBe(1_000);
  clock.advance(4_000);
  health.call('acquireSlot', 0.001, false);
  expect(health.downSinceMs).toBeNull();
  expect(health.lastOutage).toEqual({ fromMs: 1_000, toMs: 5_500 });
  health.succeeded();
  expect(health.lastOutage).toEqual({ fromMs: 1_000, toMs: 5_500 });
});

test('no lease ends while the store is down; one valid when the outage began gets recovery + TTL', () => {
  const clock = new FakeClock(0);
  const health = new StoreHealth({ clock });
  // Up, no outage: a lease ends at its expiry.
  expect(health.leaseMayEnd(10_000, 9_999, TTL)).toBe(false);
  expect(health.leaseMayEnd(10_000, 10_000, TTL)).toBe(true);

  clock.advance(20_000);
  health.failed();
  // Down: not even a lease that expired long before.
  expect(health.leaseMayEnd(10_000, 25_000, TTL)).toBe(false);
  expect(health.leaseDeadline(30_000, TTL)).toBeNull();
  clock.advance(30_000);
  health.succeeded();
  expect(health.lastOutage).toEqual({ fromMs: 20_000, toMs: 50_000 });

  // Expired before the outage began: the outage did not cost it anything.
  expect(health.leaseMayEnd(10_000, 50_000, TTL)).toBe(true);
  // Expired during the outage, or shortly after recovery: a full TTL from recovery.
  for (const expiry of [20_000, 35_000, 50_000, 70_000]) {
    expect(health.leaseDeadline(expiry, TTL)).toBe(110_000);
    expect(health.leaseMayEnd(expiry, 109_999, TTL)).toBe(false);
    expect(health.leaseMayEnd(expiry, 110_000, TTL)).toBe(true);
  }
  // Renewed past that: its own expiry.
  expect(health.leaseDeadline(130_000, TTL)).toBe(130_000);
});

test('a flapping store keeps every recent outage: a short later one does not shorten an earlier grace', () => {
  const clock = new FakeClock(0);
  const health = new StoreHealth({ clock });
  health.failed(10_000);
  health.succeeded(40_000);
  health.failed(41_000);
  health.succeeded(41_100);
  expect(health.lastOutage).toEqual({ fromMs: 41_000, toMs: 41_100 });
  // Lapsed in the first outage: its grace (recovery at 40 s + TTL) stands.
  expect(health.leaseDeadline(30_000, TTL)).toBe(100_000);
  expect(health.leaseDeadline(15_000, TTL)).toBe(100_000);
  // Valid when both began: the later recovery counts.
  expect(health.leaseDeadline(45_000, TTL)).toBe(101_100);
  // Bounded memory: many outages later, the oldest is forgotten.
  for (let i = 0; i < 100; i++) {
    health.failed(200_000 + i * 10);
    health.succeeded(200_000 + i * 10 + 5);
  }
  expect(health.leaseDeadline(15_000, TTL)).toBe(15_000);
});

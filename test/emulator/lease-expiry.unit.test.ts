/**
 * A lease timer that fires before the clock reaches the lease's end must not end
 * the stream early. Clock injected, timers faked: the order of events is the test, not wall time.
 */
import { loadConfig } from '../../src/config';
import type { Account } from '../../src/emulator/accounts';
import { StreamRegistry } from '../../src/emulator/streams';

const T0 = 1_700_000_000_000;

describe('emulator lease expiry', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  test('a timer firing 1 ms early re-arms; the ended snapshot is at or after created_at_ms + ttl', () => {
    const cfg = loadConfig({ env: {}, overrides: { emulator: { leaseTtlSeconds: 2 } } }).emulator;
    const clock = { now: T0 };
    const streams = new StreamRegistry(cfg, () => clock.now);
    const stream = streams.create({ id: 'acct-1' } as Account);
    const ttlMs = stream.ttlSeconds * 1000;

    // The timer fires when the injected clock still reads 1 ms before the lease's end.
    clock.now = T0 + ttlMs - 1;
    jest.advanceTimersByTime(ttlMs);
    expect(streams.view(stream)).toMatchObject({ state: 'active', ended_at_ms: null, expires_at_ms: T0 + ttlMs });

    clock.now = T0 + ttlMs;
    jest.advanceTimersByTime(1);
    const ended = streams.view(stream);
    expect(ended).toMatchObject({ state: 'ended', end_reason: 'expired', expires_at_ms: null });
    expect(ended.ended_at_ms!).toBeGreaterThanOrEqual(ended.created_at_ms + ttlMs);
    streams.close();
  });

  test('a keepalive moves the end: the old timer firing does not expire the renewed lease', () => {
    const cfg = loadConfig({ env: {}, overrides: { emulator: { leaseTtlSeconds: 2 } } }).emulator;
    const clock = { now: T0 };
    const streams = new StreamRegistry(cfg, () => clock.now);
    const stream = streams.create({ id: 'acct-1' } as Account);
    clock.now = T0 + 1000;
    streams.keepalive(stream);
    clock.now = T0 + 2500;
    jest.advanceTimersByTime(2500);
    expect(stream.state).toBe('active');
    clock.now = T0 + 3000;
    jest.advanceTimersByTime(500);
    expect(streams.view(stream)).toMatchObject({ state: 'ended', end_reason: 'expired', ended_at_ms: T0 + 3000 });
    streams.close();
  });

  test('a read past the lease end sees the stream expired even when the lease timer has not fired (busy loop)', () => {
    const cfg = loadConfig({ env: {}, overrides: { emulator: { leaseTtlSeconds: 2 } } }).emulator;
    const clock = { now: T0 };
    const streams = new StreamRegistry(cfg, () => clock.now);
    const account = { id: 'acct-1' } as Account;
    const stream = streams.create(account);
    // The clock passes the lease's end; no timer runs (the loop is still busy).
    clock.now = T0 + 2000 + 150;
    expect(streams.require(stream.id, account)).toBe(stream);
    expect(streams.view(stream)).toMatchObject({ state: 'ended', end_reason: 'expired', ended_at_ms: T0 + 2150, expires_at_ms: null });
    // ...so a keepalive arriving then cannot revive it.
    expect(() => streams.keepalive(stream)).toThrow(/cannot be renewed/);
    // Before the end, a read changes nothing.
    const other = streams.create(account);
    clock.now += 1999;
    expect(streams.get(other.id)?.state).toBe('active');
    streams.close();
  });
});

import { loadConfig } from '../../../src/config';
import type { DeprecationConfig } from '../../../src/config';
import { keyShare, SunsetPolicy } from '../../../src/gateway/legacy/http/sunset';
import { FakeClock } from '../../helpers/fake-clock';

const SUNSET = '2026-06-30T00:00:00Z';
const LINK = 'https://docs.example.com/migrate';
const K1 = '0000000000000001'; // share 0.0
const K2 = 'ffffffff00000000'; // share ~1.0

function policy(deprecation: Record<string, unknown>, clock: FakeClock): SunsetPolicy {
  const cfg = loadConfig({
    env: {},
    skipDefaultFile: true,
    overrides: { deprecation: { date: '2026-01-01', sunset: SUNSET, link: LINK, ...deprecation } },
  });
  return new SunsetPolicy(cfg.deprecation as DeprecationConfig, clock);
}

const at = (iso: string) => Date.parse(iso);

describe('sunset policy (injected clock)', () => {
  test('an explicit window opens at start and closes at end; the refusal names the sunset, the guide and the end', async () => {
    const clock = new FakeClock(at('2026-03-10T09:59:59Z'));
    const p = policy({ brownouts: { windows: [{ start: '2026-03-10T10:00:00Z', end: '2026-03-10T10:30:00Z' }] } }, clock);
    expect(p.admitCreate(K1)).toBeUndefined();
    clock.set(at('2026-03-10T10:00:00Z'));
    const r = p.admitCreate(K1)!;
    expect(r.reason).toBe('brownout');
    expect(r.error.status).toBe(503);
    expect(r.error.code).toBe('brownout');
    expect(r.error.message).toContain(SUNSET);
    expect(r.error.message).toContain(LINK);
    expect(r.error.message).toContain('2026-03-10T10:30:00.000Z');
    expect(r.error.options.headers).toEqual({ 'retry-after': '1800' });
    expect(Buffer.byteLength(r.closeReason)).toBeLessThanOrEqual(123);
    expect(p.admitSocket(K1)).toBeUndefined(); // sockets only when brownouts.sockets
    clock.set(at('2026-03-10T10:30:00Z'));
    expect(p.admitCreate(K1)).toBeUndefined();
    await p.close();
  });

  test('a cron window lasts durationMinutes from each match, in its time zone', async () => {
    // Tuesdays 15:00 Berlin (CET in March: 14:00 UTC), 20 minutes.
    const clock = new FakeClock(at('2026-03-10T13:59:00Z'));
    const p = policy(
      { brownouts: { schedule: [{ cron: '0 15 * * 2', durationMinutes: 20, timezone: 'Europe/Berlin' }], sockets: true } },
      clock,
    );
    expect(p.admitCreate(K1)).toBeUndefined();
    clock.set(at('2026-03-10T14:00:00Z'));
    expect(p.admitCreate(K1)?.reason).toBe('brownout');
    expect(p.admitSocket(K1)?.reason).toBe('brownout');
    clock.set(at('2026-03-10T14:19:59Z'));
    expect(p.windowEnd(clock.now())).toBe(at('2026-03-10T14:20:00Z'));
    expect(p.admitCreate(K1)?.error.options.headers).toEqual({ 'retry-after': '1' });
    clock.set(at('2026-03-10T14:20:00Z'));
    expect(p.admitCreate(K1)).toBeUndefined();
    clock.set(at('2026-03-11T14:05:00Z')); // Wednesday
    expect(p.admitCreate(K1)).toBeUndefined();
    clock.set(at('2026-03-10T14:10:00Z')); // a clock that steps back rescans
    expect(p.admitCreate(K1)?.reason).toBe('brownout');
    await p.close();
  });

  test('share, onlyKeys and exemptKeys pick the same keys every time', async () => {
    expect(keyShare(K1)).toBeLessThan(0.01);
    expect(keyShare(K2)).toBeGreaterThan(0.99);
    const clock = new FakeClock(at('2026-03-10T10:05:00Z'));
    const window = { start: '2026-03-10T10:00:00Z', end: '2026-03-10T11:00:00Z' };
    const half = policy({ brownouts: { windows: [window], share: 0.5 } }, clock);
    expect(half.admitCreate(K1)?.reason).toBe('brownout');
    expect(half.admitCreate(K2)).toBeUndefined();
    const only = policy({ brownouts: { windows: [window], onlyKeys: [K2] } }, clock);
    expect(only.admitCreate(K1)).toBeUndefined();
    expect(only.admitCreate(K2)?.reason).toBe('brownout');
    const exempt = policy({ brownouts: { windows: [window], exemptKeys: [K1] } }, clock);
    expect(exempt.admitCreate(K1)).toBeUndefined();
    expect(exempt.admitCreate(K2)?.reason).toBe('brownout');
    await Promise.all([half.close(), only.close(), exempt.close()]);
  });

  test('after the sunset: serve ignores brownouts, refuse answers 410, brownout keeps the schedule', async () => {
    const window = { start: '2026-07-01T10:00:00Z', end: '2026-07-01T11:00:00Z' };
    const clock = new FakeClock(at('2026-07-01T10:30:00Z'));
    const serve = policy({ afterSunset: 'serve', brownouts: { windows: [window] } }, clock);
    const refuse = policy({ afterSunset: 'refuse', brownouts: { windows: [window] } }, clock);
    const brown = policy({ afterSunset: 'brownout', brownouts: { windows: [window] } }, clock);
    expect(serve.admitCreate(K1)).toBeUndefined();
    expect(brown.admitCreate(K1)?.error.status).toBe(503);
    const gone = refuse.admitCreate(K1)!;
    expect(gone.reason).toBe('sunset');
    expect(gone.error.status).toBe(410);
    expect(gone.error.code).toBe('interface_retired');
    expect(gone.error.message).toContain(LINK);
    expect(refuse.admitSocket(K1)).toBeUndefined(); // running streams keep their sockets
    clock.set(at('2026-07-01T12:00:00Z')); // outside the window
    expect(brown.admitCreate(K1)).toBeUndefined();
    expect(refuse.admitCreate(K1)?.error.status).toBe(410);
    clock.set(at('2026-06-29T23:59:59Z')); // before the sunset `refuse` still serves
    expect(refuse.admitCreate(K1)).toBeUndefined();
    await Promise.all([serve.close(), refuse.close(), brown.close()]);
  });

  test('config rejects a bad cron, an empty window and a malformed key hash, naming the key', () => {
    const load = (brownouts: Record<string, unknown>) => () =>
      loadConfig({ env: {}, skipDefaultFile: true, overrides: { deprecation: { brownouts } } });
    expect(load({ schedule: [{ cron: 'weekly', durationMinutes: 10 }] })).toThrow(/deprecation\.brownouts\.schedule\.0\.cron/);
    expect(load({ windows: [{ start: '2026-03-10T10:00:00Z', end: '2026-03-10T10:00:00Z' }] })).toThrow(
      /deprecation\.brownouts\.windows\.0\.end/,
    );
    expect(load({ exemptKeys: ['svc-raw-key'] })).toThrow(/deprecation\.brownouts\.exemptKeys/);
    expect(load({ share: 2 })).toThrow(/deprecation\.brownouts\.share/);
  });
});

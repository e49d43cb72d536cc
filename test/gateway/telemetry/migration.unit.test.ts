import { memoryStore } from '../../../src/gateway/store/memory';
import { clientFamily, MAX_FAMILIES_PER_KEY, migrationStatus } from '../../../src/gateway/telemetry/migration';
import { DeprecationUsage } from '../../../src/gateway/telemetry/usage';
import { createLogger } from '../../../src/lib/logger';
import { FakeClock, settle } from '../../helpers/fake-clock';

const DEPRECATION = { date: '2026-01-01T00:00:00Z', sunset: '2026-12-31T00:00:00Z', link: '/docs/migration' };
const DAY = 86_400_000;
const NOW = Date.parse('2026-05-01T12:00:00Z');

describe('migration status rules', () => {
  test.each([
    [undefined, undefined, 'inactive'],
    [NOW - DAY, undefined, 'legacy-only'],
    [NOW - DAY, NOW - 31 * DAY, 'legacy-only'],
    [NOW - DAY, NOW - 29 * DAY, 'migrating'],
    [NOW - 14 * DAY, NOW - DAY, 'migrating'], // exactly 14 days ago still counts as recent
    [NOW - 15 * DAY, NOW - DAY, 'migrated'],
    [NOW - 15 * DAY, NOW - 15 * DAY, 'inactive'],
    [undefined, NOW, 'migrated'],
  ])('last legacy %p, last passthrough %p → %s', (legacy, passthrough, status) => {
    expect(migrationStatus(legacy, passthrough, NOW)).toBe(status);
  });
});

describe('client families', () => {
  test.each([
    [undefined, 'none'],
    ['', 'none'],
    ['svc-python/1.4.2 (CPython 3.11.4; Linux)', 'svc-python/1.4'],
    ['python-requests/2.31.0', 'python-requests/2.31'],
    ['SVC-Node/v2', 'svc-node/2'],
    ['Mozilla/5.0 (Macintosh) AppleWebKit/537.36 Chrome/120', 'browser'],
    ['curl/8.5.0', 'curl/8.5'],
    ['x'.repeat(10_000), 'other'],
    ['!!/1.0', 'other'],
    [`${'a'.repeat(60)}/1.0`, 'other'], // names longer than 40 characters are not families
  ])('%p → %s', (ua, family) => {
    expect(clientFamily(ua)).toBe(family);
  });

  test('parsed once per User-Agent (memo), and still right after a client rotates more agents than the memo holds', () => {
    expect(clientFamily('svc-python/1.4.2')).toBe('svc-python/1.4');
    for (let i = 0; i < 2000; i++) expect(clientFamily(`rotating${i}/${i % 7}.1`)).toBe(`rotating${i}/${i % 7}.1`);
    expect(clientFamily('svc-python/1.4.2')).toBe('svc-python/1.4');
    expect(clientFamily('Mozilla/5.0 (X11)')).toBe('browser');
  });

  test('at most MAX_FAMILIES_PER_KEY families per key; the rest count as other', async () => {
    const store = memoryStore();
    const usage = new DeprecationUsage(store, createLogger('silent'), new FakeClock(NOW));
    for (let i = 0; i < MAX_FAMILIES_PER_KEY + 5; i++) usage.request('k1', 'GET /v0.2/models', 'acct', clientFamily(`client${i}/1.0`));
    await usage.flush();
    const r = await usage.report(DEPRECATION);
    const families = r.keys[0]!.migration.client_families.legacy;
    expect(Object.keys(families)).toHaveLength(MAX_FAMILIES_PER_KEY + 1);
    expect(families.other).toBe(5);
    await store.close();
  });
});

describe('passthrough counts', () => {
  test('are summed in process and written by a timer without any flush, then reported per key', async () => {
    const store = memoryStore();
    const clock = new FakeClock(NOW);
    // Written 2 s after the first event: the calls 1 s apart all land in that one write.
    const usage = new DeprecationUsage(store, createLogger('silent'), clock, 2_000);
    usage.request('k1', 'POST /v0.2/streams', 'acct');
    usage.passthrough('k1', 'v1beta', 'svc-node/2.0');
    clock.advance(1000);
    usage.passthrough('k1', 'v1beta', 'svc-node/2.0');
    usage.passthrough('k1', 'billing', 'curl/8.5');
    usage.passthrough('k2', 'v1beta', 'none');
    expect(await store.hgetall('depr:pt:k1')).toEqual({});
    clock.advance(1000);
    await settle();
    expect(await store.hgetall('depr:pt:k1')).toEqual({
      first_seen_ms: NOW,
      last_seen_ms: NOW + 1000,
      v1beta: 2,
      billing: 1,
      'ua:svc-node/2.0': 2,
      'ua:curl/8.5': 1,
    });
    const r = await usage.report(DEPRECATION);
    // k2 never used /v0.2: not in the report.
    expect(r.keys.map((k) => k.key_hash)).toEqual(['k1']);
    expect(r.keys[0]!.migration).toMatchObject({ status: 'migrating', v1beta_requests: 2, billing_requests: 1 });
    await store.close();
  });
});

/**
 * The metrics the shipped alerts and dashboard (deploy/) read beyond the request and stream ones:
 * the drain gauges (present at 0 before any drain), the sunset timestamp, keys by migration status
 * (the report's `by_status`, read from the store at most once a minute whatever the scrape rate),
 * and the store's error counter (0 from an operation's first call).
 */
import { memoryStore } from '../../../src/gateway/store/memory';
import { GatewayMetrics } from '../../../src/gateway/telemetry/metrics';
import { DeprecationUsage } from '../../../src/gateway/telemetry/usage';
import { createLogger } from '../../../src/lib/logger';
import { FakeClock } from '../../helpers/fake-clock';

const base = { activeStreams: () => 0, socketConnections: () => 0 };

function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

test('drain gauges: 0 before any drain, what the drain reports while it runs, 0 again after', async () => {
  const metrics = new GatewayMetrics(base, { defaultMetrics: false });
  const idle = await metrics.text();
  expect(sample(idle, 'gateway_drain_active')).toBe(0);
  expect(sample(idle, 'gateway_drain_held_connections{kind="socket"}')).toBe(0);
  expect(sample(idle, 'gateway_drain_held_connections{kind="relay"}')).toBe(0);
  expect(sample(idle, 'gateway_drain_seconds_left')).toBe(0);

  metrics.drainState({ draining: true, sockets: 12, relays: 2, secondsLeft: 3540.5 });
  const draining = await metrics.text();
  expect(sample(draining, 'gateway_drain_active')).toBe(1);
  expect(sample(draining, 'gateway_drain_held_connections{kind="socket"}')).toBe(12);
  expect(sample(draining, 'gateway_drain_held_connections{kind="relay"}')).toBe(2);
  expect(sample(draining, 'gateway_drain_seconds_left')).toBe(3540.5);

  // Past the deadline the time left reads 0, never negative; a finished drain reads all 0.
  metrics.drainState({ draining: true, sockets: 1, relays: 0, secondsLeft: -3 });
  expect(sample(await metrics.text(), 'gateway_drain_seconds_left')).toBe(0);
  metrics.drainState({ draining: false, sockets: 5, relays: 5, secondsLeft: 100 });
  const done = await metrics.text();
  expect(sample(done, 'gateway_drain_active')).toBe(0);
  expect(sample(done, 'gateway_drain_held_connections{kind="socket"}')).toBe(0);
  expect(sample(done, 'gateway_drain_seconds_left')).toBe(0);
});

test('sunset timestamp and keys by migration status: every status from the first scrape, one store read per minute', async () => {
  let reads = 0;
  let counts: Record<string, number> = { 'legacy-only': 3, migrating: 1 };
  const metrics = new GatewayMetrics(
    {
      ...base,
      sunsetMs: Date.parse('2026-12-31T00:00:00Z'),
      migrationStatuses: async () => {
        reads++;
        return counts;
      },
    },
    { defaultMetrics: false },
  );
  const [first] = await Promise.all([metrics.text(), metrics.text()]);
  expect(sample(first, 'gateway_deprecation_sunset_timestamp_seconds')).toBe(Date.parse('2026-12-31T00:00:00Z') / 1000);
  expect(sample(first, 'gateway_migration_keys{status="legacy-only"}')).toBe(3);
  expect(sample(first, 'gateway_migration_keys{status="migrating"}')).toBe(1);
  expect(sample(first, 'gateway_migration_keys{status="migrated"}')).toBe(0);
  expect(sample(first, 'gateway_migration_keys{status="inactive"}')).toBe(0);
  // Concurrent scrapes share one read; the next scrape inside the minute reads nothing.
  counts = { 'legacy-only': 0 };
  const second = await metrics.text();
  expect(reads).toBe(1);
  expect(sample(second, 'gateway_migration_keys{status="legacy-only"}')).toBe(3);
});

test('a failed status read keeps the gauge at its last figures instead of failing the scrape', async () => {
  const metrics = new GatewayMetrics(
    { ...base, migrationStatuses: () => Promise.reject(new Error('store away')) },
    { defaultMetrics: false },
  );
  expect(sample(await metrics.text(), 'gateway_migration_keys{status="legacy-only"}')).toBe(0);
});

test("usage.statusCounts agrees with the report's by_status", async () => {
  const store = memoryStore();
  const DAY = 86_400_000;
  const clock = new FakeClock(Date.parse('2026-06-01T12:00:00Z'));
  const usage = new DeprecationUsage(store, createLogger('silent'), clock);
  const [a, b, c] = ['a', 'b', 'c'].map((x) => x.repeat(16)) as [string, string, string];
  usage.request(a, 'POST /v0.2/streams');
  usage.request(b, 'POST /v0.2/streams');
  usage.request(c, 'POST /v0.2/streams');
  usage.passthrough(b, 'v1beta', 'none');
  await usage.flush();
  clock.advance(20 * DAY); // all three fall silent (inactive); then a calls /v0.2 again (legacy-only), c /v1beta (migrated)
  usage.request(a, 'POST /v0.2/streams');
  usage.passthrough(c, 'v1beta', 'none');
  await usage.flush();
  const report = await usage.report({ date: '2026-01-01T00:00:00Z', sunset: '2026-12-31T00:00:00Z', link: '/docs/migration' });
  expect(report.totals.by_status).toEqual({ 'legacy-only': 1, migrating: 0, migrated: 1, inactive: 1 });
  expect(await usage.statusCounts()).toEqual(report.totals.by_status);
  await usage.close();
  await store.close();
});

test('refusals by brownout and after the sunset read 0 before the first one', async () => {
  const text = await new GatewayMetrics(base, { defaultMetrics: false }).text();
  for (const reason of ['brownout', 'sunset'])
    for (const kind of ['create', 'socket'])
      expect(sample(text, `gateway_legacy_refusals_total{reason="${reason}",kind="${kind}"}`)).toBe(0);
});

test('stream ends read 0 for every end reason before the first end', async () => {
  const reasons = ['client_requested', 'lease_expired', 'upstream_ended'];
  const text = await new GatewayMetrics({ ...base, endReasons: reasons }, { defaultMetrics: false }).text();
  for (const reason of reasons) expect(sample(text, `gateway_legacy_streams_ended_total{reason="${reason}"}`)).toBe(0);
});

test("a store operation's error counter reads 0 from its first call, before any failure", async () => {
  const metrics = new GatewayMetrics(base, { defaultMetrics: false });
  metrics.store.call('commitTick', 0.0002, false);
  const text = await metrics.text();
  expect(sample(text, 'gateway_store_errors_total{op="commitTick"}')).toBe(0);
  metrics.store.call('commitTick', 2, true);
  expect(sample(await metrics.text(), 'gateway_store_errors_total{op="commitTick"}')).toBe(1);
});

/**
 * The shipped Prometheus rules (deploy/prometheus): valid for `promtool check rules`, their unit
 * tests pass under `promtool test rules` (Debian's prometheus package, installed by .ci/run), every
 * alert has a summary, a runbook line and a severity, and a unit test that fires it and one where
 * it stays silent; every metric the rules and the dashboard read is one the gateway exports.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { parse } from 'yaml';
import { GatewayMetrics } from '../../src/gateway/telemetry/metrics';
import { PROMETHEUS_DIR, ROOT, alerts, dashboardQueries, metricNames, recordedNames, ruleFiles, rules } from './deploy-files';

function promtool(args: string[]): { status: number | null; out: string } {
  const r = spawnSync('promtool', args, { cwd: ROOT, encoding: 'utf8', timeout: 60_000 });
  if (r.error) throw new Error(`promtool could not run (${r.error.message}): install Debian's prometheus package (.ci/run does)`);
  return { status: r.status, out: `${r.stdout}${r.stderr}` };
}

const TESTS_DIR = path.join(PROMETHEUS_DIR, 'tests');
const testFiles = () =>
  fs
    .readdirSync(TESTS_DIR)
    .filter((f) => f.endsWith('.yml'))
    .map((f) => path.join(TESTS_DIR, f));

test('promtool check rules accepts every rule file', () => {
  const r = promtool(['check', 'rules', ...ruleFiles()]);
  expect(r.out).not.toMatch(/FAILED/);
  expect(r.status).toBe(0);
});

test('promtool test rules: every unit test passes', () => {
  const r = promtool(['test', 'rules', ...testFiles()]);
  expect(r.out).toMatch(/SUCCESS/);
  expect(r.out).not.toMatch(/FAILED/);
  expect(r.status).toBe(0);
});

test('the alerts operations.md asks for are all there, each with a summary, a runbook line and a severity', () => {
  const names = alerts().map((a) => a.alert);
  expect(names).toEqual(
    expect.arrayContaining([
      'GatewayLegacyStreamsEndingAbnormally',
      'GatewayTicksLate',
      'GatewayUpstreamDown',
      'GatewayStoreUnavailable',
      'GatewayFailover',
      'GatewayDrainRunningLong',
      'GatewayPassthroughErrors',
      'GatewaySunsetLegacyOnlyKeys',
      'GatewayMediaWorkerRestarting',
    ]),
  );
  expect(new Set(names).size).toBe(names.length);
  for (const a of alerts()) {
    expect([a.alert, a.annotations?.summary]).toEqual([a.alert, expect.stringMatching(/\S/)]);
    expect([a.alert, a.annotations?.runbook]).toEqual([a.alert, expect.stringMatching(/^[^\n]{20,}$/)]);
    expect([a.alert, a.labels?.severity]).toEqual([a.alert, expect.stringMatching(/^(critical|warning|info)$/)]);
  }
});

test("docs/operations.md lists every alert with its rule's `for` and severity", () => {
  const doc = fs.readFileSync(path.join(ROOT, 'docs', 'operations.md'), 'utf8');
  const rows = [...doc.matchAll(/^\| `(Gateway\w+)` \| ([^|]+) \| (\w+) \|/gm)].map((m) => [m[1], m[2]!.trim(), m[3]]);
  expect(rows).toEqual(alerts().map((a) => [a.alert, a.for ?? '—', a.labels?.severity]));
});

interface UnitTest {
  input_series: { series: string }[];
  alert_rule_test?: { alertname: string; exp_alerts: { exp_labels?: Record<string, string> }[] }[];
}

test('every alert has a unit test that fires it and one where it stays silent', () => {
  const fires = new Set<string>();
  const silent = new Set<string>();
  for (const file of testFiles()) {
    for (const t of (parse(fs.readFileSync(file, 'utf8')) as { tests: UnitTest[] }).tests) {
      const jobs = new Set(t.input_series.map((s) => /job="([^"]*)"/.exec(s.series)?.[1] ?? ''));
      for (const c of t.alert_rule_test ?? []) {
        if (c.exp_alerts.length > 0) fires.add(c.alertname);
        // Silent: nothing expected at all, or series of a job for which nothing is expected.
        const firing = new Set(c.exp_alerts.map((a) => a.exp_labels?.job ?? ''));
        if (c.exp_alerts.length === 0 || [...jobs].some((j) => !firing.has(j))) silent.add(c.alertname);
      }
    }
  }
  const names = alerts().map((a) => a.alert!);
  expect(names.filter((n) => !fires.has(n))).toEqual([]);
  expect(names.filter((n) => !silent.has(n))).toEqual([]);
});

/** Series names a scrape of a gateway exports (histograms as their _bucket/_sum/_count series). */
async function exportedNames(): Promise<Set<string>> {
  const metrics = new GatewayMetrics({
    activeStreams: () => 0,
    socketConnections: () => 0,
    upstreamImpaired: () => 0,
    deprecatedKeys: async () => 0,
    upstreamUp: () => 1,
    migrationStatuses: async () => ({}),
    sunsetMs: 0,
    mediaWorker: () => ({ up: true, rssBytes: 1, heapUsedBytes: 1, cpuSeconds: 0, relays: 0 }),
  });
  const names = new Set<string>();
  for (const m of await metrics.registry.getMetricsAsJSON()) {
    names.add(m.name);
    if (String(m.type) === 'histogram') for (const s of ['_bucket', '_sum', '_count']) names.add(m.name + s);
  }
  return names;
}

test('every metric the rules and the dashboard read is exported by the gateway or recorded by the rules', async () => {
  const exported = await exportedNames();
  const recorded = recordedNames();
  const read = [...rules().map((r) => r.expr), ...dashboardQueries().map((q) => q.expr)].flatMap(metricNames);
  // `up` is Prometheus's own per-target series.
  const unknown = [...new Set(read)].filter((n) => !exported.has(n) && !recorded.has(n) && n !== 'up');
  expect(unknown).toEqual([]);
  // The reader sees what it should: a sample of the names it finds.
  expect(read).toEqual(
    expect.arrayContaining(['gateway_upstream_up', 'gateway_legacy_tick_lateness_seconds_bucket', 'job:gateway_migration_keys:max']),
  );
});

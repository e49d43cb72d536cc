/**
 * The shipped rules and dashboard against a real Prometheus scraping a real fleet: redis-server,
 * the emulator and two replica CLIs (test/helpers/fleet.ts) with a few live streams, Prometheus
 * (Debian's package) scraping both replicas and evaluating deploy/prometheus/*.yml every second.
 * Every metric the rules and the dashboard read is in the scrape, every rule evaluates healthy,
 * every dashboard query evaluates and every panel shows data; then alerts become true on the real
 * processes: SIGKILL of a stream owner fires GatewayFailover, and SIGKILL of the emulator (the
 * upstream) puts GatewayUpstreamDown in pending (its `for: 2m` is not waited out).
 */
import { openResults } from '../helpers/results-socket';
import { KEY, deadline, frameBody, http, ownerOf, until, useFleet } from '../gateway/fleet/fleet-test';
import { asQuery, dashboard, metricNames, recordedNames, ruleFiles, rules } from './deploy-files';
import { startPrometheus } from './prometheus-server';
import type { PrometheusServer } from './prometheus-server';

const JOB = 'legacy-gateway';
// Two replicas on a loaded 2-core box; the upstream probed every second so its loss shows at once.
const fleet = useFleet({ ids: ['A', 'B'], logLevel: 'warn', config: { telemetry: { upstreamProbeMs: 1000 } } });
let prom: PrometheusServer;

beforeAll(async () => {
  prom = await startPrometheus({ job: JOB, targets: fleet().replicas.map((r) => `127.0.0.1:${r.port}`), ruleFiles: ruleFiles() });
}, 60_000);
afterAll(async () => {
  await prom?.stop();
});

async function create(url: string): Promise<string> {
  const r = await http(url, 'POST', '/v0.2/streams', { body: frameBody({ interval_seconds: 1 }) });
  expect(r.status).toBe(201);
  return (r.body as { stream_id: string }).stream_id;
}

/** Names the rules and the dashboard read, split into the gateway's and the rules' own. */
function namesRead(): { exported: string[]; recorded: string[] } {
  const recorded = recordedNames();
  const all = [
    ...new Set(
      [...rules().map((r) => r.expr), ...dashboard().panels.flatMap((p) => (p.targets ?? []).map((t) => t.expr))].flatMap(metricNames),
    ),
  ];
  return { exported: all.filter((n) => !recorded.has(n) && n !== 'up'), recorded: all.filter((n) => recorded.has(n)) };
}

test('with live streams and passthrough traffic, every metric the rules and the dashboard read is in the scrape', async () => {
  const [a, b] = [fleet().replica('A'), fleet().replica('B')];
  await deadline(
    until(async () => (await prom.targets()).filter((t) => t.health === 'up').length === 2),
    30_000,
    'both replicas scraped',
  );

  // Streams owned by A (the failover test kills it) and by B, results on a socket, one ended by its client.
  const onA = [await create(a.url), await create(a.url)];
  await create(b.url);
  const ended = await create(b.url);
  for (const id of onA) expect(await ownerOf(fleet(), id)).toBe('A');
  const socket = await openResults(b.url, onA[0]!, KEY, { waitMs: null });
  await deadline(socket.waitFor(2), 30_000, 'first results');
  socket.close();
  expect((await http(b.url, 'DELETE', `/v0.2/streams/${ended}`)).status).toBe(200);
  for (const r of [a, b]) for (let i = 0; i < 3; i++) expect((await http(r.url, 'GET', '/v1beta/models')).status).toBe(200);

  const { exported, recorded } = namesRead();
  expect(exported.length).toBeGreaterThan(15);
  let inScrape: string[] = [];
  let missing: string[] = exported;
  // Recorded series appear after an evaluation that had input; the gateway's after a scrape.
  await deadline(
    until(async () => {
      inScrape = await prom.names(`{job="${JOB}"}`);
      const held = new Set([...inScrape, ...(await prom.names('{__name__=~"job:.+"}'))]);
      missing = [...exported, ...recorded].filter((n) => !held.has(n));
      return missing.length === 0;
    }),
    60_000,
    'every metric read in Prometheus',
  ).catch(() => undefined);
  expect(missing).toEqual([]);
  expect(inScrape).toEqual(expect.arrayContaining(exported));
}, 120_000);

test('every rule evaluates healthy; every dashboard query evaluates and every panel shows data', async () => {
  const expected = rules().map((r) => r.alert ?? r.record);
  let loaded: Awaited<ReturnType<PrometheusServer['rules']>> = [];
  await deadline(
    until(async () => (loaded = await prom.rules()).every((r) => r.health !== 'unknown')),
    30_000,
    'every rule evaluated',
  );
  expect(loaded.map((r) => r.name).sort()).toEqual([...expected].sort());
  expect(loaded.filter((r) => r.health !== 'ok').map((r) => `${r.name}: ${r.lastError}`)).toEqual([]);

  const problems: string[] = [];
  const empty: string[] = [];
  for (const p of dashboard().panels.filter((x) => x.targets)) {
    let shows = false;
    for (const t of p.targets!) {
      const r = await prom.query(asQuery(t.expr, JOB));
      if (!r.ok) problems.push(`${p.title} ${t.refId}: ${r.error}`);
      if (r.result.length > 0) shows = true;
    }
    if (!shows) empty.push(p.title);
  }
  expect(problems).toEqual([]);
  expect(empty).toEqual([]);
  // What a replica weighs with a few streams (resident memory), for sizing notes.
  const rss = await prom.query(`process_resident_memory_bytes{job="${JOB}"}`);
  console.log(
    `replica RSS (MiB): ${(rss.result as { value: [number, string] }[]).map((s) => (Number(s.value[1]) / 2 ** 20).toFixed(0)).join(', ')}`,
  );
}, 60_000);

async function alertState(name: string): Promise<string | undefined> {
  return (await prom.alerts()).find((a) => a.labels.alertname === name)?.state;
}

test('SIGKILL of the replica owning streams: the survivor adopts them and GatewayFailover fires', async () => {
  expect(await alertState('GatewayFailover')).toBeUndefined();
  const killedAt = Date.now();
  fleet().replica('A').kill('SIGKILL');
  await deadline(
    until(async () => (await alertState('GatewayFailover')) === 'firing'),
    90_000,
    'GatewayFailover firing',
  );
  console.log(`GatewayFailover firing ${((Date.now() - killedAt) / 1000).toFixed(1)} s after SIGKILL of the owner`);
  const alert = (await prom.alerts()).find((a) => a.labels.alertname === 'GatewayFailover')!;
  expect(alert.labels).toMatchObject({ job: JOB, severity: 'warning' });
  expect(Number(alert.value)).toBeGreaterThan(0);
}, 120_000);

test('SIGKILL of the upstream: gateway_upstream_up drops to 0 and GatewayUpstreamDown goes pending', async () => {
  expect(await alertState('GatewayUpstreamDown')).toBeUndefined();
  expect((await prom.query(`max(gateway_upstream_up{job="${JOB}"})`)).result).toEqual([
    expect.objectContaining({ value: [expect.any(Number), '1'] }),
  ]);
  const killedAt = Date.now();
  fleet().emulator.child.kill('SIGKILL');
  await deadline(
    until(async () => ['pending', 'firing'].includes((await alertState('GatewayUpstreamDown')) ?? '')),
    60_000,
    'GatewayUpstreamDown pending',
  );
  console.log(
    `GatewayUpstreamDown ${await alertState('GatewayUpstreamDown')} ${((Date.now() - killedAt) / 1000).toFixed(1)} s after SIGKILL of the upstream`,
  );
}, 90_000);

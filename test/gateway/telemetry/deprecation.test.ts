/**
 * Deprecation telemetry and operations, after one scripted legacy session on a real emulator +
 * gateway: deprecation headers on every /v0.2 response and upgrade, the per-key report (JSON and
 * CSV) behind the admin token, Prometheus metrics, and logs that never contain a key or token.
 */
import type { Config } from '../../../src/config';
import { startEmulator } from '../../../src/emulator/server';
import type { RunningEmulator } from '../../../src/emulator/server';
import { startGateway } from '../../../src/gateway/server';
import type { RunningGateway } from '../../../src/gateway/server';
import { memoryStore } from '../../../src/gateway/store/memory';
import type { Store } from '../../../src/gateway/store/store';
import { DeprecationUsage } from '../../../src/gateway/telemetry/usage';
import type { DeprecationReport, KeyUsage } from '../../../src/gateway/telemetry/usage';
import { keyHash } from '../../../src/lib/keys';
import { createLogger } from '../../../src/lib/logger';
import { clipBody, frameBody, http, KEY, KEY_B, KEY_REVOKED } from '../../helpers/stack';
import { openResults } from '../../helpers/results-socket';
import { FAST_RETRY, TEST_PUBLISHER, testConfig } from '../../helpers/config';
import { deadline, sleep } from '../../helpers/time';

const ADMIN = 'admin-token-for-tests-0123456789';
const IMF_FIXDATE = /^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d{2} (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4} \d{2}:\d{2}:\d{2} GMT$/;

interface Run {
  cfg: Config;
  emulator: RunningEmulator;
  gateway: RunningGateway;
  store: Store;
  /** Every log line of the gateway (level trace) and the emulator. */
  logs: string[];
  /** Secrets the run handled: keys, publish tokens, the admin token. */
  secrets: string[];
  streams: string[];
}

const configFor = (overrides: Record<string, unknown> = {}): Config =>
  testConfig(
    {
      logLevel: 'trace',
      shutdownGraceMs: 3000,
      admin: { token: ADMIN },
      deprecation: { date: '2025-06-01T00:00:00Z', sunset: '2026-06-30T00:00:00Z', link: 'https://docs.example.com/migrate' },
      emulator: { autoPublish: TEST_PUBLISHER },
    },
    overrides,
  );

/** A legacy customer's session, plus a migrated client on /v1beta, all through the gateway. */
async function scriptedSession(url: string, emulatorUrl: string, secrets: string[], streams: string[]): Promise<void> {
  // Old SDK: deprecated fps + sampling_ratio pair, no mode.
  const clip = await http(url, 'POST', '/v0.2/streams', {
    body: {
      processing: { fps: 10, sampling_ratio: 0.4, clip_length_seconds: 1, delay_seconds: 0.4 },
      inference: { prompt: 'What happens?', model: 'local/analyzer' },
    },
  });
  expect(clip.status).toBe(201);
  const clipId = (clip.body as { stream_id: string }).stream_id;
  secrets.push((clip.body as { room: { token: string } }).room.token);
  streams.push(clipId);
  const frame = await http(url, 'POST', '/v0.2/streams', { body: frameBody({ interval_seconds: 0.4 }) });
  expect(frame.status).toBe(201);
  const frameId = (frame.body as { stream_id: string }).stream_id;
  secrets.push((frame.body as { room: { token: string } }).room.token);
  streams.push(frameId);

  const sock = await openResults(url, clipId, KEY);
  await sock.waitFor(2);
  const ka = await http(url, 'POST', `/v0.2/streams/${clipId}/keepalive`);
  expect(ka.status).toBe(200);
  secrets.push((ka.body as { room_token: string }).room_token);
  expect((await http(url, 'GET', '/v0.2/models')).status).toBe(200);
  expect((await http(url, 'PATCH', `/v0.2/streams/${frameId}/config/prompt`, { body: { prompt: 'Count' } })).status).toBe(200);
  // Wait for the frame stream's first inference before ending it.
  for (let i = 0; i < 60 && !(await emulatorCharged(emulatorUrl)); i++) await sleep(50);
  expect((await http(url, 'DELETE', `/v0.2/streams/${clipId}`)).status).toBe(200);
  expect(await sock.closed).toEqual({ code: 1001, reason: 'client_requested' });
  expect((await http(url, 'DELETE', `/v0.2/streams/${frameId}`)).status).toBe(200);

  // Second customer: one failed create (unknown model) and a models call.
  expect((await http(url, 'POST', '/v0.2/streams', { key: KEY_B, body: clipBody({}, { model: 'local/nope' }) })).status).toBe(422);
  expect((await http(url, 'GET', '/v0.2/models', { key: KEY_B })).status).toBe(200);
  // Failed authentication is not attributed to anyone.
  expect((await http(url, 'POST', '/v0.2/streams', { key: KEY_REVOKED, body: clipBody() })).status).toBe(401);
  expect((await http(url, 'POST', '/v0.2/streams', { key: null, body: clipBody() })).status).toBe(401);

  // A migrated client on /v1beta through the same address: no deprecation telemetry.
  const v1 = await http(url, 'POST', '/v1beta/streams', { body: {} });
  expect(v1.status).toBe(201);
  secrets.push((v1.body as { publish: { token: string } }).publish.token);
  const v1ka = await http(url, 'POST', `/v1beta/streams/${(v1.body as { id: string }).id}/keepalive`);
  secrets.push((v1ka.body as { publish: { token: string } }).publish.token);
  expect((await http(url, 'DELETE', `/v1beta/streams/${(v1.body as { id: string }).id}`)).status).toBe(200);
}

async function emulatorCharged(emulatorUrl: string): Promise<boolean> {
  const b = await http(emulatorUrl, 'GET', '/billing/accounts/me/balance');
  return (b.body as { balance_microcents: number }).balance_microcents < 1_000_000_000;
}

async function startRun(): Promise<Run> {
  const cfg = configFor();
  const logs: string[] = [];
  const logger = createLogger('trace', 'gateway', { write: (s: string) => void logs.push(s) });
  const emulator = await startEmulator(cfg, logger.child({ component: 'emulator' }));
  const store = memoryStore();
  const gateway = await startGateway(cfg, logger, emulator.url, { store, retry: FAST_RETRY });
  return { cfg, emulator, gateway, store, logs, secrets: [KEY, KEY_B, KEY_REVOKED, ADMIN], streams: [] };
}

async function admin(url: string, path: string, token: string | null = ADMIN) {
  const res = await fetch(`${url}${path}`, { headers: token === null ? {} : { authorization: `Bearer ${token}` } });
  return { status: res.status, headers: res.headers, text: await res.text() };
}

describe('deprecation telemetry and operations after a scripted legacy session', () => {
  let run: Run;
  let report: DeprecationReport;
  let metricsText: string;
  let metricsType: string | null;
  beforeAll(async () => {
    run = await startRun();
    await scriptedSession(run.gateway.url, run.emulator.url, run.secrets, run.streams);
    await run.gateway.gateway.usage.flush();
    const r = await admin(run.gateway.url, '/admin/deprecation');
    expect(r.status).toBe(200);
    report = JSON.parse(r.text) as DeprecationReport;
    const m = await fetch(`${run.gateway.url}/metrics`);
    metricsType = m.headers.get('content-type');
    metricsText = await m.text();
  }, 30_000);
  afterAll(async () => {
    await run.gateway.close();
    await run.emulator.close();
    await run.store.close();
  });

  test('every /v0.2 response carries Deprecation, Sunset and Link; /v1beta and /billing responses do not', async () => {
    const url = run.gateway.url;
    const responses = [
      await fetch(`${url}/v0.2/models`),
      await fetch(`${url}/v0.2/streams`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' }), // 401
      await fetch(`${url}/v0.2/streams`, {
        method: 'POST',
        headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
        body: '{bad',
      }), // 400
      await fetch(`${url}//v0.2//nope`), // 404
      await fetch(`${url}/v0.2/streams`, {
        method: 'OPTIONS',
        headers: { origin: 'https://app.example', 'access-control-request-method': 'POST' },
      }), // preflight
    ];
    expect(responses.map((r) => r.status)).toEqual([200, 401, 400, 404, 204]);
    for (const r of responses) {
      expect(r.headers.get('deprecation')).toBe('@1748736000');
      expect(r.headers.get('sunset')).toBe('Tue, 30 Jun 2026 00:00:00 GMT');
      expect(r.headers.get('sunset')).toMatch(IMF_FIXDATE);
      expect(r.headers.get('link')).toBe('<https://docs.example.com/migrate>; rel="deprecation"');
      await r.text();
    }
    for (const path of ['/v1beta/models', '/billing/pricing', '/healthz']) {
      const r = await fetch(`${url}${path}`);
      expect(r.headers.get('deprecation')).toBeNull();
      expect(r.headers.get('sunset')).toBeNull();
      await r.text();
    }
  });

  test('the results-socket upgrade (101) carries the deprecation headers too', async () => {
    const sock = await deadline(openResults(run.gateway.url, run.streams[0]!, null), 3000, 'upgrade');
    sock.close();
    expect(sock.upgradeHeaders).toMatchObject({
      deprecation: '@1748736000',
      sunset: 'Tue, 30 Jun 2026 00:00:00 GMT',
      link: '<https://docs.example.com/migrate>; rel="deprecation"',
    });
  });

  test('the report: per key hash, who used which endpoints, sources, modes, deprecated fields, models, inferences, sockets, end reasons', () => {
    expect(report.deprecation).toEqual({
      date: '2025-06-01T00:00:00Z',
      sunset: '2026-06-30T00:00:00Z',
      link: 'https://docs.example.com/migrate',
    });
    expect(report.keys.map((k) => k.key_hash).sort()).toEqual([keyHash(KEY), keyHash(KEY_B)].sort());
    const a = report.keys.find((k) => k.key_hash === keyHash(KEY)) as KeyUsage;
    expect(a.account_ids).toEqual(['0f5b8a8e-3d2c-4a47-9a61-6f1f2b9c0a01']);
    expect(a.requests).toEqual({
      'POST /v0.2/streams': 2,
      'WS /v0.2/ws/streams/:id': 1,
      'POST /v0.2/streams/:id/keepalive': 1,
      'GET /v0.2/models': 1,
      'PATCH /v0.2/streams/:id/config/prompt': 1,
      'DELETE /v0.2/streams/:id': 2,
    });
    expect(a.requests_total).toBe(8);
    expect(a.streams).toEqual({ total: 2, by_source: { native: 2 }, by_mode: { clip: 1, frame: 1 } });
    expect(a.deprecated_fields).toEqual({ fps: 1, sampling_ratio: 1 });
    expect(a.backends).toEqual({ svc: 2 });
    expect(a.models).toEqual({ 'local/analyzer': 2 });
    expect(a.inferences.ok).toBeGreaterThanOrEqual(3);
    expect(a.output_tokens).toBeGreaterThan(0);
    expect(a.websocket_connections).toBe(1);
    expect(a.end_reasons).toEqual({ client_requested: 2 });
    expect(Date.parse(a.first_seen_at!)).toBeLessThanOrEqual(Date.parse(a.last_seen_at!));

    const b = report.keys.find((k) => k.key_hash === keyHash(KEY_B)) as KeyUsage;
    expect(b.requests).toEqual({ 'POST /v0.2/streams': 1, 'GET /v0.2/models': 1 });
    expect(b.streams.total).toBe(0);
    expect(b.account_ids).toEqual(['0f5b8a8e-3d2c-4a47-9a61-6f1f2b9c0a02']);

    expect(report.totals).toMatchObject({ keys: 2, requests: 10, streams: 2, websocket_connections: 1 });
    expect(report.daily).toHaveLength(1);
    expect(report.daily[0]).toMatchObject({ active_keys: 2, requests: 10, streams: 2 });
  });

  test('?format=csv: a header and one row per key, as an attachment', async () => {
    const r = await admin(run.gateway.url, '/admin/deprecation?format=csv');
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toMatch(/^text\/csv/);
    expect(r.headers.get('content-disposition')).toMatch(/^attachment; filename="v0\.2-usage-\d{4}-\d{2}-\d{2}\.csv"$/);
    const rows = r.text.trim().split('\r\n');
    expect(rows).toHaveLength(3);
    expect(rows[0]).toMatch(/^key_hash,account_ids,first_seen_at,/);
    const row = rows.find((l) => l.startsWith(keyHash(KEY)))!;
    expect(row).toContain('fps=1; sampling_ratio=1');
    expect(row).toContain('DELETE /v0.2/streams/:id=2; GET /v0.2/models=1');
  });

  test('admin auth: 401 without or with a wrong token; unknown format 400', async () => {
    const none = await admin(run.gateway.url, '/admin/deprecation', null);
    expect(none.status).toBe(401);
    expect(JSON.parse(none.text)).toEqual({ detail: expect.any(String) });
    expect(none.headers.get('www-authenticate')).toMatch(/^Bearer/);
    expect((await admin(run.gateway.url, '/admin/deprecation', `${ADMIN}x`)).status).toBe(401);
    expect((await admin(run.gateway.url, '/admin/deprecation?format=xml')).status).toBe(400);
  });

  test('/metrics: requests by route and status, streams, inferences, latencies, sockets, passthrough; no keys', async () => {
    expect(metricsType).toMatch(/^text\/plain/);
    const text = metricsText;
    if (process.env.SHOW_METRICS) console.log(text);
    const has = (line: RegExp) => expect(text).toMatch(line);
    has(/^gateway_http_requests_total\{method="POST",route="\/v0\.2\/streams",status="201"\} 2$/m);
    has(/^gateway_http_requests_total\{method="POST",route="\/v0\.2\/streams",status="401"\} 2$/m);
    has(/^gateway_http_requests_total\{method="POST",route="\/v1beta\/streams",status="201"\} 1$/m);
    has(/^gateway_http_requests_total\{method="DELETE",route="\/v1beta\/streams\/:id",status="200"\} 1$/m);
    has(/^gateway_http_request_duration_seconds_bucket\{le="0\.1",method="GET",route="\/v0\.2\/models"\} \d+$/m);
    has(/^gateway_passthrough_requests_total\{prefix="v1beta",outcome="ok"\} 3$/m);
    has(/^gateway_legacy_requests_total\{endpoint="POST \/v0\.2\/streams"\} 3$/m);
    has(/^gateway_legacy_requests_total\{endpoint="WS \/v0\.2\/ws\/streams\/:id"\} 1$/m);
    has(/^gateway_legacy_streams_created_total\{source="native",mode="clip"\} 1$/m);
    has(/^gateway_legacy_streams_created_total\{source="native",mode="frame"\} 1$/m);
    has(/^gateway_legacy_streams_ended_total\{reason="client_requested"\} 2$/m);
    has(/^gateway_legacy_streams_active 0$/m);
    has(/^gateway_legacy_deprecated_fields_total\{field="fps"\} 1$/m);
    has(/^gateway_legacy_inferences_total\{model="local\/analyzer",outcome="ok"\} [3-9]\d*$/m);
    has(/^gateway_legacy_inference_latency_seconds_count\{model="local\/analyzer"\} \d+$/m);
    has(/^gateway_legacy_total_latency_seconds_sum\{model="local\/analyzer"\} [\d.e-]+$/m);
    has(/^gateway_legacy_tick_lateness_seconds_count \d+$/m);
    for (const reason of ['in_flight_limit', 'late', 'self_fenced'])
      has(new RegExp(`^gateway_legacy_ticks_skipped_total\\{reason="${reason}"\\} \\d+$`, 'm'));
    has(/^gateway_ws_connections_total 1$/m);
    has(/^gateway_ws_messages_shed_total 0$/m);
    has(/^# TYPE gateway_upstream_errors_total counter$/m);
    has(/^gateway_deprecated_api_keys 2$/m);
    has(/^process_cpu_seconds_total /m);
    for (const secret of run.secrets) expect(text).not.toContain(secret);
    expect(text).not.toContain(keyHash(KEY));
  });

  test('/readyz reports the store and the last upstream probe; /healthz is plain ok', async () => {
    await run.gateway.gateway.upstreamHealth.check();
    const ready = await http(run.gateway.url, 'GET', '/readyz', { key: null });
    expect(ready).toMatchObject({ status: 200, body: { upstream: true, store: true, draining: false } });
    const health = await fetch(`${run.gateway.url}/healthz`);
    expect(await health.text()).toBe('ok');
  });

  test('the default deprecation link is served: the migration guide', async () => {
    const r = await fetch(`${run.gateway.url}/docs/migration`);
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toMatch(/^text\/markdown/);
    expect(await r.text()).toMatch(/\/v1beta/);
  });

  test('logs: JSON lines, a request id on every access line, and not one key or publish token', () => {
    const lines = run.logs
      .join('')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    const access = lines.filter((l) => l.req && l.res);
    expect(access.length).toBeGreaterThan(20);
    for (const l of access) expect(l.reqId).toEqual(expect.stringMatching(/^[\w-]+$/));
    expect(lines.some((l) => l.msg === 'legacy stream ended')).toBe(true);
    expect(run.secrets.length).toBeGreaterThanOrEqual(9);
    const all = run.logs.join('');
    for (const secret of run.secrets) expect({ secret, found: all.includes(secret) }).toEqual({ secret, found: false });
  });
});

describe('telemetry survives what the store survives, and is rolled up', () => {
  test('a second gateway on the same store reports the first one’s usage', async () => {
    const cfg = configFor();
    const logger = createLogger('silent');
    const emulator = await startEmulator(cfg, logger);
    const store = memoryStore();
    try {
      const first = await startGateway(cfg, logger, emulator.url, { store });
      expect((await http(first.url, 'GET', '/v0.2/models')).status).toBe(200);
      const id = (
        (await http(first.url, 'POST', '/v0.2/streams', { body: frameBody({ interval_seconds: 5 }) })).body as { stream_id: string }
      ).stream_id;
      await first.close(); // ends the stream: server_shutdown
      const second = await startGateway(cfg, logger, emulator.url, { store });
      try {
        const r = JSON.parse((await admin(second.url, '/admin/deprecation')).text) as DeprecationReport;
        const k = r.keys.find((x) => x.key_hash === keyHash(KEY))!;
        expect(k.requests).toMatchObject({ 'POST /v0.2/streams': 1 });
        expect(k.end_reasons).toEqual({ server_shutdown: 1 });
        expect(id).toEqual(expect.any(String));
      } finally {
        await second.close();
      }
    } finally {
      await emulator.close();
      await store.close();
    }
  });

  test('the node-cron job logs a daily summary; without an admin token /admin is 404', async () => {
    const lines: string[] = [];
    const cfg = configFor({ admin: { token: undefined }, telemetry: { rollupCron: '* * * * * *' } });
    const logger = createLogger('info', 'gateway', { write: (s: string) => void lines.push(s) });
    const emulator = await startEmulator(cfg, createLogger('silent'));
    // Usage from before this process (the store outlives it): the day's one run, whenever the job
    // first fires, already has it (later runs of that day are claimed, they log nothing).
    const store = memoryStore();
    const earlier = new DeprecationUsage(store, createLogger('silent'));
    earlier.request(keyHash(KEY), 'GET /v0.2/models');
    await earlier.flush();
    const gw = await startGateway(cfg, logger, emulator.url, { store });
    try {
      expect((await admin(gw.url, '/admin/deprecation')).status).toBe(404);
      const rollups = () => lines.map((l) => JSON.parse(l) as { rollup?: { totals: { keys: number } } }).filter((l) => l.rollup);
      for (let i = 0; i < 200 && !rollups().length; i++) await sleep(50);
      expect(rollups()[0]!.rollup!.totals.keys).toBe(1);
    } finally {
      await gw.close();
      await emulator.close();
      await store.close();
    }
  });
});

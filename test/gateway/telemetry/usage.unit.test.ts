import { memoryStore } from '../../../src/gateway/store/memory';
import { reportToCsv } from '../../../src/gateway/telemetry/report-csv';
import { routeLabel } from '../../../src/gateway/telemetry/http';
import { DeprecationUsage } from '../../../src/gateway/telemetry/usage';
import { deprecationHeaders } from '../../../src/gateway/telemetry/deprecation';
import { createLogger } from '../../../src/lib/logger';
import { loadConfig, ConfigError } from '../../../src/config';
import { FakeClock, settle } from '../../helpers/fake-clock';

const DEPRECATION = { date: '2026-01-01T00:00:00Z', sunset: '2026-12-31T00:00:00Z', link: '/docs/migration' };
const DAY1 = Date.parse('2026-03-01T10:00:00Z');
const DAY2 = Date.parse('2026-03-02T09:30:00Z');

describe('deprecation usage counters', () => {
  test('per key: first/last seen, endpoints, streams by source and mode, fields, backends, models, inferences, sockets, end reasons', async () => {
    const store = memoryStore();
    const clock = new FakeClock(DAY1);
    const usage = new DeprecationUsage(store, createLogger('silent'), clock);
    usage.request('aaa', 'POST /v0.2/streams', 'acct-1');
    usage.streamCreated('aaa', {
      transport: 'webrtc',
      mode: 'clip',
      backend: 'svc',
      model: 'm/a',
      deprecatedFields: ['webrtc', 'fps', 'sampling_ratio'],
    });
    usage.inference('aaa', true, 12);
    usage.inference('aaa', false, 0);
    usage.socketOpened('aaa');
    usage.streamEnded('aaa', 'webrtc_disconnected');
    clock.set(DAY2);
    usage.request('aaa', 'POST /v0.2/streams', 'acct-1');
    usage.streamCreated('aaa', { transport: 'native', mode: 'frame', backend: 'thirdparty', model: 'm/b', deprecatedFields: [] });
    usage.request('aaa', 'POST /v0.2/streams/:id/keepalive', 'acct-1');
    usage.request('bbb', 'GET /v0.2/models', 'acct-2');
    await usage.flush();

    const r = await usage.report(DEPRECATION);
    expect(r.totals).toEqual({
      keys: 2,
      requests: 4,
      streams: 2,
      inferences: 2,
      output_tokens: 12,
      websocket_connections: 1,
      by_status: { 'legacy-only': 2, migrating: 0, migrated: 0, inactive: 0 },
      refused: { brownout: 0, sunset: 0 },
    });
    expect(r.keys.map((k) => k.key_hash)).toEqual(['aaa', 'bbb']); // same last-seen instant: by hash
    const a = r.keys[0]!;
    expect(a).toEqual({
      key_hash: 'aaa',
      account_ids: ['acct-1'],
      first_seen_at: '2026-03-01T10:00:00.000Z',
      last_seen_at: '2026-03-02T09:30:00.000Z',
      requests_total: 3,
      requests: { 'POST /v0.2/streams': 2, 'POST /v0.2/streams/:id/keepalive': 1 },
      streams: { total: 2, by_source: { webrtc: 1, native: 1 }, by_mode: { clip: 1, frame: 1 } },
      deprecated_fields: { webrtc: 1, fps: 1, sampling_ratio: 1 },
      backends: { svc: 1, thirdparty: 1 },
      models: { 'm/a': 1, 'm/b': 1 },
      inferences: { ok: 1, failed: 1 },
      output_tokens: 12,
      websocket_connections: 1,
      end_reasons: { webrtc_disconnected: 1 },
      migration: {
        status: 'legacy-only',
        legacy_daily: { '2026-03-02': 2, '2026-03-01': 1 },
        v1beta_requests: 0,
        billing_requests: 0,
        first_passthrough_at: null,
        last_passthrough_at: null,
        client_families: { legacy: {}, passthrough: {} },
        refused: { brownout: 0, sunset: 0 },
      },
    });
    expect(r.daily).toEqual([
      { date: '2026-03-02', active_keys: 2, requests: 3, streams: 1, inferences: 0, output_tokens: 0, websocket_connections: 0 },
      { date: '2026-03-01', active_keys: 1, requests: 1, streams: 1, inferences: 2, output_tokens: 12, websocket_connections: 1 },
    ]);
    expect(await usage.keyCount()).toBe(2);
    await store.close();
  });

  test('the CSV has one row per key, stable columns, RFC 4180 quoting and no formula injection', async () => {
    const store = memoryStore();
    const usage = new DeprecationUsage(store, createLogger('silent'), new FakeClock(DAY1));
    usage.request('k1', 'POST /v0.2/streams', 'acct-1');
    usage.streamCreated('k1', { transport: 'room', mode: 'clip', backend: 'svc', model: '=cmd|"x",y', deprecatedFields: [] });
    await usage.flush();
    const csv = reportToCsv(await usage.report(DEPRECATION));
    const lines = csv.split('\r\n');
    expect(lines).toHaveLength(3);
    expect(lines[2]).toBe('');
    expect(lines[0]!.split(',')).toEqual([
      'key_hash',
      'account_ids',
      'first_seen_at',
      'last_seen_at',
      'requests_total',
      'streams_total',
      'streams_native',
      'streams_webrtc',
      'streams_room',
      'streams_clip',
      'streams_frame',
      'deprecated_fields',
      'backends',
      'models',
      'inferences_ok',
      'inferences_failed',
      'output_tokens',
      'websocket_connections',
      'end_reasons',
      'requests_by_endpoint',
      'migration_status',
      'legacy_daily',
      'v1beta_requests',
      'billing_requests',
      'last_passthrough_at',
      'client_families_legacy',
      'client_families_passthrough',
      'refused_brownout',
      'refused_sunset',
    ]);
    expect(lines[1]).toBe(
      `k1,acct-1,2026-03-01T10:00:00.000Z,2026-03-01T10:00:00.000Z,1,1,0,0,1,1,0,,svc=1,"'=cmd|""x"",y=1",0,0,0,0,,POST /v0.2/streams=1,` +
        'legacy-only,2026-03-01=1,0,0,,,,0,0',
    );
    await store.close();
  });

  test('a failing store never throws into the caller; flush still settles; an outage is logged once, its end once, and its counters land after it', async () => {
    const store = memoryStore();
    const hbatch = store.hbatch.bind(store);
    let down = true;
    store.hbatch = (u) => (down ? Promise.reject(new Error('store down')) : hbatch(u));
    const lines: string[] = [];
    const usage = new DeprecationUsage(
      store,
      createLogger('info', 'test', { write: (s: string) => void lines.push(s) }),
      new FakeClock(DAY1),
    );
    for (let i = 0; i < 3; i++) {
      expect(() => usage.request('k', 'GET /v0.2/models')).not.toThrow();
      await usage.flush();
    }
    expect(lines.filter((l) => /deprecation counter write failed/.test(l))).toHaveLength(1);
    down = false;
    usage.request('k', 'GET /v0.2/models');
    await usage.flush();
    expect(lines.filter((l) => /deprecation counters written again/.test(l))).toHaveLength(1);
    expect(JSON.parse(lines.find((l) => /written again/.test(l))!)).toMatchObject({ failedFlushes: 3 });
    // What the store refused was kept and written once with the first flush it took, exactly once.
    expect((await store.hgetall('depr:key:k'))['req:GET /v0.2/models']).toBe(4);
    expect((await store.hgetall('depr:day:2026-03-01')).requests).toBe(4);
    await usage.close();
    await store.close();
  });

  test('counters are held and summed in process, then written in one store call per flush interval', async () => {
    const clock = new FakeClock(DAY1);
    const store = memoryStore();
    const batches: number[] = [];
    const hbatch = store.hbatch.bind(store);
    store.hbatch = (u) => {
      batches.push(u.length);
      return hbatch(u);
    };
    try {
      const usage = new DeprecationUsage(store, createLogger('silent'), clock, 1_000);
      // The key's first request here is news: written at once (key, day, account).
      usage.request('aaa', 'POST /v0.2/streams', 'acct-1');
      await settle();
      expect(batches).toEqual([3]);
      for (let tick = 0; tick < 300; tick++) usage.inference(tick % 3 ? 'aaa' : 'bbb', tick % 10 !== 0, 5);
      usage.request('aaa', 'POST /v0.2/streams', 'acct-1');
      clock.advance(999);
      await settle();
      expect(batches).toEqual([3]);
      clock.advance(1);
      await settle();
      // depr:key:aaa, depr:key:bbb, depr:day:…, depr:acct:aaa: one call for 301 events.
      expect(batches).toEqual([3, 4]);
      expect(await store.hgetall('depr:key:aaa')).toMatchObject({
        'inferences:ok': 180,
        'inferences:failed': 20,
        output_tokens: 1_000,
        'req:POST /v0.2/streams': 2,
      });
      expect(await store.hgetall('depr:key:bbb')).toEqual({ 'inferences:ok': 90, 'inferences:failed': 10, output_tokens: 500 });
      // Nothing pending, no timer: the next event starts the next interval.
      clock.advance(5_000);
      await settle();
      expect(batches).toHaveLength(2);
      // The report writes this replica's pending counters first: it is never behind itself.
      usage.inference('aaa', true, 1);
      const r = await usage.report(DEPRECATION);
      expect(r.keys.find((k) => k.key_hash === 'aaa')!.inferences).toEqual({ ok: 181, failed: 20 });
      expect(batches).toHaveLength(3);
    } finally {
      await store.close();
    }
  });

  test("news is written through at once: a key's first request, a new route, a new day, its first stream of the day", async () => {
    const clock = new FakeClock(DAY1);
    const store = memoryStore();
    let calls = 0;
    const hbatch = store.hbatch.bind(store);
    store.hbatch = (u) => {
      calls++;
      return hbatch(u);
    };
    const traits = { transport: 'native', mode: 'clip', backend: 'svc', model: 'local/analyzer', deprecatedFields: [] };
    try {
      const usage = new DeprecationUsage(store, createLogger('silent'), clock, 15_000);
      const written = async () => {
        await settle();
        return calls;
      };
      usage.request('aaa', 'POST /v0.2/streams', 'acct-1');
      expect(await written()).toBe(1);
      usage.streamCreated('aaa', traits);
      expect(await written()).toBe(2);
      expect(await store.hgetall('depr:key:aaa')).toMatchObject({ 'req:POST /v0.2/streams': 1, streams: 1, 'source:native': 1 });
      // Not news: the same route, a second stream, another key's tick.
      usage.request('aaa', 'POST /v0.2/streams', 'acct-1');
      usage.streamCreated('aaa', traits);
      usage.inference('bbb', true, 3);
      expect(await written()).toBe(2);
      // A new route is news (and takes what waited with it).
      usage.request('aaa', 'POST /v0.2/streams/:id/keepalive', 'acct-1');
      expect(await written()).toBe(3);
      expect(await store.hgetall('depr:key:aaa')).toMatchObject({ 'req:POST /v0.2/streams': 2, streams: 2 });
      expect(await store.hgetall('depr:key:bbb')).toMatchObject({ 'inferences:ok': 1 });
      // The next UTC day: the same route is news again, and so is the day's first stream.
      clock.advance(24 * 3_600_000);
      usage.request('aaa', 'POST /v0.2/streams', 'acct-1');
      expect(await written()).toBe(4);
      usage.streamCreated('aaa', traits);
      expect(await written()).toBe(5);
      await usage.close();
    } finally {
      await store.close();
    }
  });
});

describe('route labels and deprecation headers', () => {
  test.each([
    ['/v1beta/streams', '/v1beta/streams'],
    ['/v1beta/streams/3f1c/keepalive', '/v1beta/streams/:id/keepalive'],
    ['/v1beta/streams/3f1c?x=1', '/v1beta/streams/:id'],
    ['//v1beta//chat/completions', '/v1beta/chat/completions'],
    ['/v1beta/whatever/else', '/v1beta/*'],
    ['/billing/pricing/local/analyzer', '/billing/pricing/:model'],
    ['/billing/pricing', '/billing/pricing'],
    ['/v0.2/streams/feedback', '/v0.2/streams/feedback'],
    ['/v0.2/streams/abc/config/prompt', '/v0.2/streams/:id/config/prompt'],
    ['/v0.2/streams/abc/', '/v0.2/streams/:id'],
    ['/v0.2/streams/abc/info', '/v0.2/streams/:id/info'],
    ['/v0.2/streams/abc/spectate', '/v0.2/streams/:id/spectate'],
    ['/v0.2/openapi.json', '/v0.2/openapi.json'],
    ['/v0.2/ws/streams/abc', '/v0.2/ws/streams/:id'],
    ['/v0.2/streams/abc/unknown', '/v0.2/*'],
    ['/metrics', '/metrics'],
    ['/', '/'],
    ['/random/path/123', 'other'],
  ])('%s → %s', (url, label) => {
    expect(routeLabel(url)).toBe(label);
  });

  test('RFC 9745 / 8594 / 8288 renderings of the configured dates and link', () => {
    expect(deprecationHeaders({ date: '2025-06-01T00:00:00Z', sunset: '2026-06-30', link: 'https://example.com/migrate' })).toEqual({
      deprecation: '@1748736000',
      sunset: 'Tue, 30 Jun 2026 00:00:00 GMT',
      link: '<https://example.com/migrate>; rel="deprecation"',
    });
  });

  test('config: sunset before deprecation, a bad cron, a bad time zone and a short admin token fail naming the key', () => {
    const load = (overrides: Record<string, unknown>) => () => loadConfig({ env: {}, skipDefaultFile: true, overrides });
    expect(load({ deprecation: { date: '2026-06-01', sunset: '2026-01-01' } })).toThrow(/deprecation\.sunset/);
    expect(load({ deprecation: { date: 'soon' } })).toThrow(/deprecation\.date/);
    expect(load({ telemetry: { rollupCron: 'every day' } })).toThrow(/telemetry\.rollupCron/);
    expect(load({ telemetry: { rollupTimezone: 'Mars/Olympus' } })).toThrow(/telemetry\.rollupTimezone/);
    expect(load({ admin: { token: 'short' } })).toThrow(ConfigError);
    const env = loadConfig({
      env: { ADMIN_TOKEN: 'a-long-enough-admin-token', DEPRECATION_SUNSET: '2027-01-01', TELEMETRY_METRICS: 'false' },
      skipDefaultFile: true,
    });
    expect(env.admin.token).toBe('a-long-enough-admin-token');
    expect(env.deprecation.sunset).toBe('2027-01-01');
    expect(env.telemetry.metrics).toBe(false);
  });
});

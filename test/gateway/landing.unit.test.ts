/** What `/` tells: the facts from configuration, the clock and the replica, and never a secret. */
import { loadConfig } from '../../src/config';
import type { Config } from '../../src/config';
import { displayUrl } from '../../src/lib/display-url';
import { landingFacts, landingHtml } from '../../src/gateway/landing';
import type { LandingDeps } from '../../src/gateway/landing';
import { SunsetPolicy } from '../../src/gateway/legacy';
import { FakeClock } from '../helpers/fake-clock';

const at = (iso: string) => Date.parse(iso);
const SUNSET = '2026-12-31T00:00:00Z';

const policies: SunsetPolicy[] = [];
afterAll(async () => {
  await Promise.all(policies.map((p) => p.close()));
});

function deps(cfg: Config, clock: FakeClock, over: Partial<LandingDeps> = {}): LandingDeps {
  const sunset = new SunsetPolicy(cfg.deprecation, clock);
  policies.push(sunset);
  return { cfg, upstreamUrl: 'http://127.0.0.1:8081', streams: { activeCount: 3 }, fleet: { solo: true }, sunset, clock, ...over };
}

const config = (overrides: Record<string, unknown> = {}, env: NodeJS.ProcessEnv = {}) =>
  loadConfig({ env, overrides: { deprecation: { date: '2026-01-01T00:00:00Z', sunset: SUNSET }, ...overrides } });

test('a solo replica on the embedded emulator and the memory store, days to the sunset from the clock', () => {
  const clock = new FakeClock(at('2026-12-20T12:00:00Z'));
  const f = landingFacts(deps(config({ store: { gatewayId: 'gw-1' } }), clock));
  expect(f.upstream).toEqual({ url: 'http://127.0.0.1:8081', embedded_emulator: true });
  expect(f.store).toEqual({ kind: 'memory', address: null });
  expect(f.fleet).toEqual({ member: false, gateway_id: 'gw-1' });
  expect(f.legacy).toEqual({
    state: 'deprecated',
    deprecated_at: '2026-01-01T00:00:00.000Z',
    sunset: '2026-12-31T00:00:00.000Z',
    days_to_sunset: 11, // 10.5 days, rounded up
    after_sunset: 'serve',
    live_streams_here: 3,
  });
  expect(f.links).toMatchObject({
    migration_guide: '/docs/migration',
    metrics: '/metrics',
    metrics_needs_token: false,
    metrics_port: null,
  });
  expect(f.brownouts.open_until).toBeNull();
  const html = landingHtml(f);
  expect(html).toContain('<strong>11 days</strong> from now');
  expect(html).toContain('the embedded emulator');
  expect(html).toContain('<a href="/metrics">/metrics</a>');
});

test('brownouts: the open window and its end, upcoming windows soonest first (past ones left out), the schedule', () => {
  const clock = new FakeClock(at('2026-06-01T10:10:00Z'));
  const cfg = config({
    deprecation: {
      date: '2026-01-01T00:00:00Z',
      sunset: SUNSET,
      brownouts: {
        windows: [
          { start: '2026-07-01T10:00:00Z', end: '2026-07-01T11:00:00Z' },
          { start: '2026-05-01T10:00:00Z', end: '2026-05-01T11:00:00Z' },
          { start: '2026-06-01T10:00:00Z', end: '2026-06-01T10:30:00Z' },
        ],
        schedule: [{ cron: '0 15 * * 2', durationMinutes: 10 }],
        share: 0.25,
        sockets: true,
      },
    },
  });
  const f = landingFacts(deps(cfg, clock));
  expect(f.legacy.state).toBe('brownout');
  expect(f.brownouts).toMatchObject({
    open_until: '2026-06-01T10:30:00.000Z',
    windows: [
      { start: '2026-06-01T10:00:00.000Z', end: '2026-06-01T10:30:00.000Z' },
      { start: '2026-07-01T10:00:00.000Z', end: '2026-07-01T11:00:00.000Z' },
    ],
    more_windows: 0,
    schedule: [{ cron: '0 15 * * 2', duration_minutes: 10, timezone: 'UTC' }],
    share: 0.25,
    results_sockets_too: true,
  });
  const html = landingHtml(f);
  expect(html).toContain('A scheduled /v0.2 brownout is on');
  expect(html).toContain('<code>0 15 * * 2</code> (UTC), for 10 minutes');
  expect(html).toContain('Applies to 25 % of keys');
});

test('past the sunset: retired with `refuse`; with `serve` brownouts no longer apply', () => {
  const clock = new FakeClock(at('2027-01-05T10:15:00Z'));
  const windows = [{ start: '2027-01-05T10:00:00Z', end: '2027-01-05T11:00:00Z' }];
  const refuse = landingFacts(deps(config({ deprecation: { sunset: SUNSET, afterSunset: 'refuse', brownouts: { windows } } }), clock));
  expect(refuse.legacy).toMatchObject({ state: 'retired', days_to_sunset: -5 });
  expect(landingHtml(refuse)).toContain('/v0.2 is retired');
  const serve = landingFacts(deps(config({ deprecation: { sunset: SUNSET, afterSunset: 'serve', brownouts: { windows } } }), clock));
  expect(serve.legacy.state).toBe('past_sunset');
  expect(serve.brownouts.open_until).toBeNull();
});

test('metrics behind a token are named, not linked; metrics on their own port are not offered here', () => {
  const clock = new FakeClock(at('2026-06-01T00:00:00Z'));
  const tokened = landingFacts(deps(config({ telemetry: { metricsToken: 'metrics-token-0123456789' } }), clock));
  expect(tokened.links).toMatchObject({ metrics: '/metrics', metrics_needs_token: true });
  const html = landingHtml(tokened);
  expect(html).not.toContain('href="/metrics"');
  expect(html).toContain('needs <code>Authorization: Bearer</code>');
  const ownPort = landingFacts(deps(config({ telemetry: { metricsPort: 9464 } }), clock));
  expect(ownPort.links).toMatchObject({ metrics: null, metrics_port: 9464 });
  const off = landingFacts(deps(config({ telemetry: { metrics: false } }), clock));
  expect(off.links).toMatchObject({ metrics: null, metrics_port: null });
});

describe('addresses lose their credentials', () => {
  test.each([
    ['redis://:hunter2-pass@redis.internal:6379/2', 'redis://redis.internal:6379/2'],
    ['rediss://gw:hunter2-pass@redis.internal:6380', 'rediss://redis.internal:6380'],
    ['redis+cluster://gw:hun?ter#2-pass@10.0.0.1:7000,[::1]:7001', 'redis+cluster://10.0.0.1:7000,[::1]:7001'],
    ['rediss+sentinel://:hunter2-pass@s1:26379,s2:26379/mymaster', 'rediss+sentinel://s1:26379,s2:26379/mymaster'],
  ])('%s → %s', (url, shown) => {
    expect(displayUrl(url)).toBe(shown);
  });

  test('an upstream URL without userinfo, query or fragment', () => {
    expect(displayUrl('https://u:hunter2-pass@api.example.com/base?key=hunter2-pass#x')).toBe('https://api.example.com/base');
    expect(displayUrl('http://127.0.0.1:8081')).toBe('http://127.0.0.1:8081');
    expect(displayUrl('::')).toBe('(not shown)');
  });
});

test('no key, token or secret from the environment reaches the facts or the page', () => {
  const secrets = {
    ADMIN_TOKEN: 'admin-token-SECRET-0001',
    METRICS_TOKEN: 'metrics-token-SECRET-0002',
    GATEWAY_SECRET: 'gateway-secret-SECRET-0003-0123456789abcdef',
    REDIS_URL: 'redis://gw:redis-pass-SECRET-0004@redis.internal:6379/0',
    UPSTREAM_URL: 'https://proxy-user:upstream-pass-SECRET-0005@api.example.com/',
  };
  const cfg = config({}, secrets);
  const clock = new FakeClock(at('2026-06-01T00:00:00Z'));
  const f = landingFacts(deps(cfg, clock, { upstreamUrl: cfg.upstreamUrl!, fleet: { solo: false } }));
  expect(f.store).toEqual({ kind: 'redis', address: 'redis://redis.internal:6379/0' });
  expect(f.upstream).toEqual({ url: 'https://api.example.com', embedded_emulator: false });
  expect(f.fleet.member).toBe(true);
  const shown = JSON.stringify(f) + landingHtml(f);
  for (const s of ['SECRET', 'redis-pass', 'proxy-user', 'upstream-pass', 'gw:'])
    expect({ s, found: shown.includes(s) }).toEqual({ s, found: false });
  // The emulator's dev keys are not there either.
  expect(shown).not.toMatch(/svc-local/);
});

test('values from configuration are escaped in the page', () => {
  const clock = new FakeClock(at('2026-06-01T00:00:00Z'));
  const cfg = config({
    store: { gatewayId: '<img src=x onerror=alert(1)>' },
    deprecation: { sunset: SUNSET, link: 'https://x.example/?a=<b>' },
  });
  const html = landingHtml(landingFacts(deps(cfg, clock)));
  expect(html).not.toContain('<img src=x');
  expect(html).toContain('&lt;img src=x onerror=alert(1)&gt;');
  expect(html).toContain('https://x.example/?a=&lt;b&gt;');
});

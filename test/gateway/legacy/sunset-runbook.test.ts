/**
 * Sunset tooling on a real emulator + gateway, the gateway on a fake clock: migration status driven
 * by real legacy and passthrough traffic, a brownout window opened and closed (creates refused, the
 * running stream, kept alive by its client, untouched), and `afterSunset: refuse`.
 */
import { keyHash } from '../../../src/lib/keys';
import type { DeprecationReport } from '../../../src/gateway/telemetry/usage';
import { frameBody, KEY, KEY_B, KEY_REVOKED, startStack } from '../../helpers/stack';
import { openResults } from '../../helpers/results-socket';
import type { Stack } from '../../helpers/stack';
import { driveUntil, FakeClock } from '../../helpers/fake-clock';

const ADMIN = 'admin-token-for-tests-0123456789';
const SUNSET = '2026-06-30T00:00:00Z';
const LINK = 'https://docs.example.com/migrate';
const DAY_MS = 86_400_000;
const T0 = Date.parse('2026-03-02T09:00:00Z');

async function call(url: string, method: string, path: string, opts: { key?: string; ua?: string; body?: unknown } = {}) {
  const headers: Record<string, string> = { 'content-type': 'application/json', authorization: `Bearer ${opts.key ?? KEY}` };
  if (opts.ua) headers['user-agent'] = opts.ua;
  const res = await fetch(`${url}${path}`, { method, headers, body: opts.body === undefined ? undefined : JSON.stringify(opts.body) });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text ? (JSON.parse(text) as Record<string, unknown>) : null };
}

async function report(url: string, query = ''): Promise<DeprecationReport> {
  const res = await fetch(`${url}/admin/deprecation${query}`, { headers: { authorization: `Bearer ${ADMIN}` } });
  expect(res.status).toBe(200);
  return (await res.json()) as DeprecationReport;
}

/**
 * Lets `ms` of the gateway's time pass in 20 s steps (ticks, leases and timers fire as they fall
 * due), with a keepalive for each of `streams` after every step, as their client sends them.
 */
async function pass(url: string, clock: FakeClock, ms: number, streams: string[] = []): Promise<void> {
  for (const end = clock.now() + ms; clock.now() < end;) {
    clock.advance(Math.min(20_000, end - clock.now()));
    for (const id of streams) expect((await call(url, 'POST', `/v0.2/streams/${id}/keepalive`)).status).toBe(200);
  }
}

const deprecation = (extra: Record<string, unknown> = {}) => ({ date: '2026-01-01T00:00:00Z', sunset: SUNSET, link: LINK, ...extra });
/**
 * A tick's deadline (fake time) far beyond a `pass` step: the emulator answers in real time, between
 * steps, so a tick is never timed out (and its model never seen as saturated) by a step of fake time.
 */
const legacy = { upstreamFailures: { tickDeadlineIntervals: 10_000 } };

describe('migration progress from real traffic', () => {
  let stack: Stack;
  const clock = new FakeClock(T0);
  beforeAll(async () => {
    stack = await startStack({ admin: { token: ADMIN }, deprecation: deprecation() }, { clock });
  });
  afterAll(() => stack.close());

  test('legacy-only → migrating → migrated → inactive, with client families; filters and sorting', async () => {
    const { url } = stack;
    expect((await call(url, 'GET', '/v0.2/models', { ua: 'svc-python/1.4.2 (CPython 3.11)' })).status).toBe(200);
    expect((await call(url, 'GET', '/v0.2/models', { key: KEY_B, ua: 'Mozilla/5.0 (X11) Chrome/120' })).status).toBe(200);
    let r = await report(url);
    const a = () => r.keys.find((k) => k.key_hash === keyHash(KEY))!;
    expect(a().migration.status).toBe('legacy-only');
    expect(a().migration.client_families.legacy).toEqual({ 'svc-python/1.4': 1 });

    // The same key on /v1beta and /billing: migrating. A refused key on /v1beta counts for nobody.
    expect((await call(url, 'GET', '/v1beta/models', { ua: 'svc-node/2.0.1' })).status).toBe(200);
    expect((await call(url, 'GET', '/billing/accounts/me/balance', { ua: 'svc-node/2.0.1' })).status).toBe(200);
    expect((await call(url, 'GET', '/billing/accounts/me/balance', { key: KEY_REVOKED })).status).toBe(401);
    r = await report(url);
    expect(a().migration).toMatchObject({
      status: 'migrating',
      v1beta_requests: 1,
      billing_requests: 1,
      legacy_daily: { '2026-03-02': 1 },
      client_families: { legacy: { 'svc-python/1.4': 1 }, passthrough: { 'svc-node/2.0': 2 } },
    });
    expect(r.keys.map((k) => k.key_hash)).not.toContain(keyHash(KEY_REVOKED));
    expect(r.totals.by_status).toEqual({ 'legacy-only': 1, migrating: 1, migrated: 0, inactive: 0 });

    const onlyLegacy = await report(url, '?status=legacy-only');
    expect(onlyLegacy.keys.map((k) => k.key_hash)).toEqual([keyHash(KEY_B)]);
    expect(onlyLegacy.keys[0]!.migration.client_families.legacy).toEqual({ browser: 1 });
    expect((await report(url, '?sort=status')).keys.map((k) => k.migration.status)).toEqual(['legacy-only', 'migrating']);
    expect((await report(url, '?sort=status&order=desc')).keys.map((k) => k.migration.status)).toEqual(['migrating', 'legacy-only']);

    // 15 days later only /v1beta: migrated. KEY_B went quiet: inactive.
    clock.set(T0 + 15 * DAY_MS);
    expect((await call(url, 'GET', '/v1beta/models')).status).toBe(200);
    r = await report(url, '?status=migrated,inactive&sort=key_hash');
    expect(r.keys.map((k) => [k.key_hash, k.migration.status])).toEqual(
      [
        [keyHash(KEY), 'migrated'],
        [keyHash(KEY_B), 'inactive'],
      ].sort((x, y) => x[0]!.localeCompare(y[0]!)),
    );
    clock.set(T0 + 30 * DAY_MS);
    expect((await report(url, '?status=inactive')).keys).toHaveLength(2);

    // CSV carries the status column and honours the filter.
    const csv = await fetch(`${url}/admin/deprecation?format=csv&status=inactive`, { headers: { authorization: `Bearer ${ADMIN}` } });
    const lines = (await csv.text()).trim().split('\r\n');
    expect(lines).toHaveLength(3);
    expect(lines[0]).toContain('migration_status');
    expect(lines.slice(1).every((l) => l.includes(',inactive,'))).toBe(true);
  });

  test('legacy usage per day keeps the last 30 days only', async () => {
    const { url } = stack;
    clock.set(T0 + 40 * DAY_MS);
    expect((await call(url, 'GET', '/v0.2/models')).status).toBe(200);
    const k = (await report(url)).keys.find((x) => x.key_hash === keyHash(KEY))!;
    expect(Object.keys(k.migration.legacy_daily)).toEqual(['2026-04-11']);
    // The stale day field is gone from the store, not only hidden.
    expect(Object.keys(await stack.gateway.gateway.store.hgetall(`depr:key:${keyHash(KEY)}`)).filter((f) => f.startsWith('day:'))).toEqual([
      'day:2026-04-11',
    ]);
  });

  test('bad report parameters are 400s naming the choices', async () => {
    for (const q of ['?status=gone', '?sort=size', '?order=up', '?status=migrated&status=inactive']) {
      const res = await fetch(`${stack.url}/admin/deprecation${q}`, { headers: { authorization: `Bearer ${ADMIN}` } });
      expect(res.status).toBe(400);
    }
  });
});

describe('a brownout window on a fake clock', () => {
  let stack: Stack;
  const clock = new FakeClock(Date.parse('2026-03-10T09:50:00Z'));
  beforeAll(async () => {
    stack = await startStack(
      {
        admin: { token: ADMIN },
        legacy,
        deprecation: deprecation({
          brownouts: { windows: [{ start: '2026-03-10T10:00:00Z', end: '2026-03-10T10:15:00Z' }], sockets: true },
        }),
      },
      { clock },
    );
  });
  afterAll(() => stack.close());

  test('creates refused with 503 naming sunset and guide while the window is open; the running stream is untouched', async () => {
    const { url } = stack;
    const created = await call(url, 'POST', '/v0.2/streams', { body: frameBody({ interval_seconds: 0.4 }) });
    expect(created.status).toBe(201);
    const id = created.body!.stream_id as string;
    const sock = await openResults(url, id, KEY);
    await driveUntil(clock, () => sock.messages.length >= 1);

    await pass(url, clock, Date.parse('2026-03-10T10:05:00Z') - clock.now(), [id]);
    const refused = await call(url, 'POST', '/v0.2/streams', { body: frameBody({ interval_seconds: 0.4 }) });
    expect(refused.status).toBe(503);
    expect(refused.headers.get('retry-after')).toBe('600');
    expect(refused.body).toEqual({
      error: 'brownout',
      message: expect.stringContaining(SUNSET) as unknown,
      request_id: expect.any(String) as unknown,
      details: { brownout_ends_at: '2026-03-10T10:15:00.000Z', sunset: SUNSET, migration_guide: LINK },
    });
    expect(refused.body!.message).toContain(LINK);
    // A body that would fail validation is still refused as a brownout: the window decides first.
    expect((await call(url, 'POST', '/v0.2/streams', { body: { nonsense: true } })).status).toBe(503);
    // A bad key is still a 401, never a brownout.
    expect((await call(url, 'POST', '/v0.2/streams', { key: KEY_REVOKED, body: frameBody() })).status).toBe(401);

    // The running stream: keepalive, prompt and results continue; a new results socket is refused with 1013.
    expect((await call(url, 'POST', `/v0.2/streams/${id}/keepalive`)).status).toBe(200);
    const before = sock.messages.length;
    await driveUntil(clock, () => sock.messages.length >= before + 1);
    const late = await openResults(url, id, KEY);
    expect(await late.closed).toEqual({ code: 1013, reason: 'brownout until 2026-03-10T10:15:00.000Z' });

    await pass(url, clock, Date.parse('2026-03-10T10:15:00Z') - clock.now(), [id]);
    const after = await call(url, 'POST', '/v0.2/streams', { body: frameBody({ interval_seconds: 5 }) });
    expect(after.status).toBe(201);

    const r = await report(url);
    expect(r.keys.find((k) => k.key_hash === keyHash(KEY))!.migration.refused).toEqual({ brownout: 3, sunset: 0 });
    expect(r.totals.refused).toEqual({ brownout: 3, sunset: 0 });
    const metrics = await (await fetch(`${url}/metrics`)).text();
    expect(metrics).toMatch(/gateway_legacy_refusals_total\{reason="brownout",kind="create"\} 2/);
    expect(metrics).toMatch(/gateway_legacy_refusals_total\{reason="brownout",kind="socket"\} 1/);

    sock.ws.close();
    for (const s of [id, after.body!.stream_id as string]) expect((await call(url, 'DELETE', `/v0.2/streams/${s}`)).status).toBe(200);
  });
});

describe('afterSunset: refuse', () => {
  test('before the sunset creates work; from the sunset on 410 with the guide; the running stream finishes normally', async () => {
    const clock = new FakeClock(Date.parse(SUNSET) - 60_000);
    const stack = await startStack({ admin: { token: ADMIN }, legacy, deprecation: deprecation({ afterSunset: 'refuse' }) }, { clock });
    try {
      const { url } = stack;
      const created = await call(url, 'POST', '/v0.2/streams', { body: frameBody({ interval_seconds: 0.4 }) });
      expect(created.status).toBe(201);
      const id = created.body!.stream_id as string;
      await pass(url, clock, 60_000, [id]);
      const gone = await call(url, 'POST', '/v0.2/streams', { body: frameBody() });
      expect(gone.status).toBe(410);
      expect(gone.body).toMatchObject({ error: 'interface_retired', details: { sunset: SUNSET, migration_guide: LINK } });
      expect(gone.body!.message).toContain(LINK);
      expect(gone.headers.get('sunset')).toBe('Tue, 30 Jun 2026 00:00:00 GMT');
      expect((await call(url, 'POST', `/v0.2/streams/${id}/keepalive`)).status).toBe(200);
      const sock = await openResults(url, id, KEY);
      await driveUntil(clock, () => sock.messages.length >= 1);
      expect((await call(url, 'DELETE', `/v0.2/streams/${id}`)).status).toBe(200);
      expect(await sock.closed).toEqual({ code: 1001, reason: 'client_requested' });
      expect((await report(url)).totals.refused).toEqual({ brownout: 0, sunset: 1 });
    } finally {
      await stack.close();
    }
  });
});

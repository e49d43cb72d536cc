/**
 * Upstream failures on real sockets: a gateway in front of a scripted upstream (FakeUpstream,
 * routed by path) whose models, balance, create and delete answers the test chooses.
 * - upstream statuses are never passed through as the client's own (429 → 503, 401 on models → 502);
 * - an outage at results-socket auth closes 1011 (retried), not 1008 (fatal);
 * - refused keys are cached (one upstream call), failed auth is limited per IP (503 / 1013);
 * - client messages never carry internal addresses;
 * - orphans: delete retried, a create answered after the client gave up is deleted, shutdown reconciles;
 * - x-request-id and traceparent reach the upstream.
 */
import { until } from '../../helpers/time';
import type http from 'node:http';
import { createLogger } from '../../../src/lib/logger';
import { startGateway } from '../../../src/gateway/server';
import type { RunningGateway } from '../../../src/gateway/server';
import { memoryStore } from '../../../src/gateway/store/memory';
import type { Store } from '../../../src/gateway/store/store';
import { FakeUpstream, json } from '../../upstream/fake-upstream';
import type { SeenRequest } from '../../upstream/fake-upstream';
import { KEY, frameBody, http as call, streamRecord } from '../../helpers/stack';
import { connectResults } from '../../helpers/results-socket';
import { FAST_RETRY, testConfig } from '../../helpers/config';

type Answer = { status: number; body: unknown; delayMs?: number } | 'reset';
const STREAM_ID = '5a0f3c7e-8b1d-4c2e-9f3a-1b2c3d4e5f60';

/** What the scripted upstream answers per route; tests change it between requests. */
interface Routes {
  balance: Answer;
  models: Answer;
  create: Answer;
  del: Answer[];
}

const ok = (body: unknown): Answer => ({ status: 200, body });
const defaults = (): Routes => ({
  balance: ok({ user_id: 'acct-1', balance_microcents: 5_000_000, balance_cents: 5 }),
  models: ok({ object: 'list', data: [{ id: 'local/analyzer', object: 'model', created: 0, owned_by: 'x', status: 'ready' }] }),
  create: ok({ id: STREAM_ID, state: 'active', publish: { type: 'room', url: 'wss://room.example/rtc', token: 't' }, ttl_seconds: 300 }),
  del: [ok({ id: STREAM_ID, deleted: true })],
});

function routed(routes: Routes) {
  const answer = (a: Answer, req: http.IncomingMessage, res: http.ServerResponse, seen: SeenRequest) => {
    if (a === 'reset') return void req.socket.destroy();
    const send = () => json(a.status, a.body)(req, res, seen);
    if (a.delayMs) setTimeout(send, a.delayMs);
    else send();
  };
  return (req: http.IncomingMessage, res: http.ServerResponse, seen: SeenRequest) => {
    const url = req.url ?? '';
    if (url.startsWith('/billing/accounts/me/balance')) return answer(routes.balance, req, res, seen);
    if (url === '/v1beta/models') return answer(routes.models, req, res, seen);
    if (req.method === 'POST' && url === '/v1beta/streams') return answer(routes.create, req, res, seen);
    if (req.method === 'DELETE') return answer(routes.del.length > 1 ? routes.del.shift()! : routes.del[0]!, req, res, seen);
    if (req.method === 'GET' && url.startsWith('/v1beta/streams/')) {
      return answer(ok({ id: STREAM_ID, state: 'active', last_frame_at_ms: null, last_frame_index: null }), req, res, seen);
    }
    return answer({ status: 404, body: { detail: 'Not Found' } }, req, res, seen);
  };
}

let fake: FakeUpstream;
let gw: RunningGateway;
let routes: Routes;
let store: Store;

async function start(legacy: Record<string, unknown> = {}, upstreamUrl?: string): Promise<void> {
  routes = defaults();
  fake = await FakeUpstream.start(routed(routes));
  store = memoryStore();
  const cfg = testConfig({ legacy: { firstFramePollMs: 60_000 } }, { legacy });
  gw = await startGateway(cfg, createLogger('silent'), upstreamUrl ?? fake.url, { retry: FAST_RETRY, store });
  // The health probe's first GET /v1beta/models goes out at start: let it land before tests count calls.
  await gw.gateway.upstreamHealth.check();
}

afterEach(async () => {
  await gw.close();
  await fake.close();
});

const paths = (method?: string) => fake.requests.filter((r) => !method || r.method === method).map((r) => r.url.split('?')[0]);

/** How a results socket that sends `key` first ends. */
const socketAuth = (streamId: string, key: string) => connectResults(gw.url, streamId, key).closed;

const record = (streamId: string) => streamRecord(streamId, 'acct-1');

describe('upstream statuses are not the client’s', () => {
  beforeEach(() => start({ upstreamFailures: { negativeKeyCacheMs: 0 } }));

  it.each([
    ['balance', 429, 503],
    ['balance', 404, 502],
    ['balance', 500, 502],
    ['models', 429, 503],
    ['models', 401, 502],
    ['models', 404, 502],
    ['models', 500, 502],
  ] as const)('upstream %s answering %i → legacy create and /v0.2/models answer %i', async (route, upstreamStatus, legacy) => {
    routes[route] = { status: upstreamStatus, body: { detail: 'internal detail from http://10.1.2.3:9000' } };
    const create = await call(gw.url, 'POST', '/v0.2/streams', { body: frameBody() });
    expect(create.status).toBe(legacy);
    expect(create.body).toMatchObject({
      error: legacy === 503 ? 'upstream_unavailable' : 'upstream_error',
      request_id: expect.any(String),
    });
    expect(JSON.stringify(create.body)).not.toMatch(/upstream_http_|10\.1\.2\.3/);
    if (route === 'models') {
      const models = await call(gw.url, 'GET', '/v0.2/models');
      expect(models.status).toBe(legacy);
      expect(JSON.stringify(models.body)).not.toMatch(/upstream_http_|10\.1\.2\.3/);
    }
  });

  it('keepalive: the upstream limiting the gateway is a retryable 503, a revoked key the client’s 401', async () => {
    expect((await call(gw.url, 'POST', '/v0.2/streams', { body: frameBody() })).status).toBe(201);
    routes.balance = { status: 429, body: { detail: 'slow down' } };
    const limited = await call(gw.url, 'POST', `/v0.2/streams/${STREAM_ID}/keepalive`);
    expect([limited.status, (limited.body as { error: string }).error]).toEqual([503, 'upstream_unavailable']);
    routes.balance = { status: 401, body: { detail: 'Invalid API key' } };
    const revoked = await call(gw.url, 'POST', `/v0.2/streams/${STREAM_ID}/keepalive`);
    expect([revoked.status, (revoked.body as { error: string }).error]).toEqual([401, 'unauthorized']);
  });

  it('a 401 on the client’s own key is still the client’s 401', async () => {
    routes.balance = { status: 401, body: { detail: 'Invalid API key' } };
    const r = await call(gw.url, 'POST', '/v0.2/streams', { body: frameBody() });
    expect(r.status).toBe(401);
    expect(r.body).toMatchObject({ error: 'unauthorized' });
  });
});

describe('outage and bad keys at authentication', () => {
  it('an unreachable upstream closes a valid key’s results socket 1011 and answers HTTP 502 without internal addresses', async () => {
    // The upstream is a port that refuses connections.
    const dead = await FakeUpstream.start();
    const deadUrl = dead.url;
    await dead.close();
    await start({}, deadUrl);
    await store.putRecord(record('s-outage'));
    await expect(socketAuth('s-outage', KEY)).resolves.toEqual({ code: 1011, reason: 'authorization unavailable' });
    const r = await call(gw.url, 'POST', '/v0.2/streams', { body: frameBody() });
    expect(r.status).toBe(502);
    expect(r.body).toMatchObject({ error: 'upstream_unreachable' });
    expect(JSON.stringify(r.body)).not.toMatch(/127\.0\.0\.1|ECONNREFUSED|http:/);
  });

  it('an upstream answering 503 at socket auth closes 1011, a refused key 1008', async () => {
    await start();
    await store.putRecord(record('s1'));
    routes.balance = { status: 503, body: { detail: 'busy' } };
    await expect(socketAuth('s1', KEY)).resolves.toMatchObject({ code: 1011 });
    routes.balance = { status: 401, body: { detail: 'Invalid API key' } };
    await expect(socketAuth('s1', 'svc-unknown')).resolves.toEqual({ code: 1008, reason: 'authentication failed' });
  });

  it('a refused key costs one upstream call, however often it is tried (negative cache)', async () => {
    await start({ upstreamFailures: { authFailuresPerMinute: 0 } });
    await store.putRecord(record('s1'));
    routes.balance = { status: 401, body: { detail: 'Invalid API key' } };
    for (let i = 0; i < 3; i++) await expect(socketAuth('s1', 'svc-unknown')).resolves.toMatchObject({ code: 1008 });
    for (let i = 0; i < 3; i++) expect((await call(gw.url, 'POST', `/v0.2/streams/s1/keepalive`, { key: 'svc-unknown' })).status).toBe(401);
    expect(paths().filter((p) => p === '/billing/accounts/me/balance')).toHaveLength(1);
  });

  it('limits failed authentications per IP: then HTTP 503 with retry-after and socket 1013, even for a good key not verified yet', async () => {
    await start({ upstreamFailures: { authFailuresPerMinute: 3, negativeKeyCacheMs: 0 } });
    await store.putRecord(record('s1'));
    routes.balance = { status: 401, body: { detail: 'Invalid API key' } };
    await expect(socketAuth('s1', 'svc-bad-1')).resolves.toMatchObject({ code: 1008 });
    expect((await call(gw.url, 'GET', '/v0.2/streams/feedback', { key: 'svc-bad-2' })).status).toBe(401);
    expect((await call(gw.url, 'GET', '/v0.2/streams/feedback', { key: 'no-prefix' })).status).toBe(401);
    const upstreamCalls = fake.requests.length;
    const limited = await call(gw.url, 'POST', '/v0.2/streams', { body: frameBody() });
    expect(limited.status).toBe(503);
    expect(limited.body).toMatchObject({ error: 'auth_rate_limited' });
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
    await expect(socketAuth('s1', KEY)).resolves.toMatchObject({ code: 1013 });
    expect(fake.requests).toHaveLength(upstreamCalls);
  });
});

describe('orphaned upstream streams and trace context', () => {
  beforeEach(() => start());

  it('sends the request id and a traceparent in the client’s trace with the create and the session’s later calls', async () => {
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
    const res = await fetch(`${gw.url}/v0.2/streams`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${KEY}`,
        'content-type': 'application/json',
        'x-request-id': 'req-abc',
        traceparent: `00-${traceId}-00f067aa0ba902b7-01`,
      },
      body: JSON.stringify(frameBody()),
    });
    expect(res.status).toBe(201);
    const create = fake.requests.find((r) => r.method === 'POST' && r.url === '/v1beta/streams')!;
    expect(create.headers['x-request-id']).toBe('req-abc');
    expect(create.headers.traceparent).toMatch(new RegExp(`^00-${traceId}-[0-9a-f]{16}-01$`));
    expect(create.headers.traceparent).not.toContain('00f067aa0ba902b7');
    // Later calls for the session (the delete at its end) stay in the create's trace.
    expect((await call(gw.url, 'DELETE', `/v0.2/streams/${STREAM_ID}`)).status).toBe(200);
    const del = fake.requests.find((r) => r.method === 'DELETE')!;
    expect(del.headers.traceparent).toMatch(new RegExp(`^00-${traceId}-[0-9a-f]{16}-01$`));
    expect(del.headers['x-request-id']).toBe('req-abc');
  });

  it('retries a failing upstream delete with backoff', async () => {
    expect((await call(gw.url, 'POST', '/v0.2/streams', { body: frameBody() })).status).toBe(201);
    routes.del = [{ status: 503, body: {} }, 'reset', ok({ id: STREAM_ID, deleted: true })];
    expect((await call(gw.url, 'DELETE', `/v0.2/streams/${STREAM_ID}`)).status).toBe(200);
    expect(paths('DELETE')).toEqual(Array(3).fill(`/v1beta/streams/${STREAM_ID}`));
    expect(gw.gateway.streams.undeletedUpstreamStreams).toEqual([]);
  });

  it('deletes a stream whose create answered after the client gave up, and frees the slot', async () => {
    routes.create = { ...(routes.create as { status: number; body: unknown }), delayMs: 300 };
    const gaveUp = new AbortController();
    const pending = fetch(`${gw.url}/v0.2/streams`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify(frameBody()),
      signal: gaveUp.signal,
    }).catch(() => 'aborted');
    await until(() => paths('POST').includes('/v1beta/streams'), 10);
    gaveUp.abort();
    await expect(pending).resolves.toBe('aborted');
    await until(() => paths('DELETE').length > 0, 10);
    expect(paths('DELETE')).toEqual([`/v1beta/streams/${STREAM_ID}`]);
    expect(gw.gateway.streams.activeCount).toBe(0);
    expect(await store.getRecord(STREAM_ID)).toBeUndefined();
  });

  it('deletes at shutdown every upstream stream whose delete kept failing', async () => {
    expect((await call(gw.url, 'POST', '/v0.2/streams', { body: frameBody() })).status).toBe(201);
    routes.del = [{ status: 500, body: {} }];
    expect((await call(gw.url, 'DELETE', `/v0.2/streams/${STREAM_ID}`)).status).toBe(200);
    expect(gw.gateway.streams.undeletedUpstreamStreams).toEqual([STREAM_ID]);
    const failed = paths('DELETE').length;
    routes.del = [ok({ id: STREAM_ID, deleted: true })];
    await gw.close();
    expect(paths('DELETE')).toHaveLength(failed + 1);
    expect(gw.gateway.streams.undeletedUpstreamStreams).toEqual([]);
  });
});

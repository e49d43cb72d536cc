/**
 * Deployment safety on real sockets: server timeouts (idle connections closed, responses in
 * progress and WebSockets not), CORS only on /v0.2 and /healthz with the origin allowlist, /metrics
 * behind a token or on its own port, /readyz independent of the upstream (whose health is a
 * gauge), and the SIGTERM readiness delay.
 */
import net from 'node:net';
import { FakeClock } from '../helpers/fake-clock';
import { frameBody, http, KEY, startStack } from '../helpers/stack';
import { openResults } from '../helpers/results-socket';
import type { Stack } from '../helpers/stack';
import { deadline } from '../helpers/time';

/** A raw TCP connection to `url` that sends nothing; resolves when the server closes it. */
function idleConnection(url: string): Promise<void> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const sock = net.connect(Number(port), hostname);
    sock.on('error', reject);
    sock.on('close', () => resolve());
  });
}

describe('server timeouts', () => {
  let s: Stack;
  beforeAll(async () => {
    s = await startStack({ server: { idleTimeoutMs: 200, keepAliveTimeoutMs: 200, headersTimeoutMs: 1000 } });
  });
  afterAll(() => s.close());

  test('an idle TCP connection is closed by the server', async () => {
    await deadline(idleConnection(s.url), 10_000, 'idle connection closed');
  });

  test('a response in progress past the idle timeout is not cut', async () => {
    // The emulator holds its answer 1.5 s: no byte flows on the client's connection meanwhile.
    await http(s.emulator.url, 'POST', '/_emulator/faults', { body: { count: 1, latencyMs: 1500 } });
    const pending = http(s.url, 'POST', '/v1beta/chat/completions', {
      body: { model: 'local/analyzer', messages: [{ role: 'user', content: 'hi' }] },
    });
    // Opened after the request: by the time it is closed, the request's idle deadline has passed.
    await deadline(idleConnection(s.url), 10_000, 'idle connection closed');
    expect((await pending).status).toBe(200);
  });

  test('an upgraded WebSocket with no traffic is not cut by the idle timeout', async () => {
    const { ws } = await openResults(s.url, 'quiet', null);
    await deadline(idleConnection(s.url), 10_000, 'idle connection closed');
    const pong = new Promise((resolve) => ws.once('pong', resolve));
    ws.ping();
    await deadline(pong, 5000, 'pong after the idle deadline');
    ws.close();
  });

  test('a keep-alive connection is closed after keepAliveTimeoutMs without a next request', async () => {
    const { hostname, port } = new URL(s.url);
    const sock = net.connect(Number(port), hostname);
    const closed = new Promise<void>((resolve) => sock.on('close', () => resolve()));
    let answer = '';
    sock.on('data', (d: Buffer) => (answer += d.toString()));
    sock.write('GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n');
    await deadline(closed, 10_000, 'keep-alive connection closed');
    expect(answer).toMatch(/^HTTP\/1\.1 200 OK\r\n[\s\S]*\r\n\r\nok$/);
  });

  test('config refuses a request timeout shorter than the headers timeout', async () => {
    await expect(startStack({ server: { headersTimeoutMs: 5000, requestTimeoutMs: 1000 } })).rejects.toThrow(/server.requestTimeoutMs/);
  });
});

test('slowloris: headers trickled byte by byte are cut at headersTimeoutMs with 408', async () => {
  // The idle timeout never fires (traffic keeps flowing): only the headers deadline can end this.
  const s = await startStack({ server: { headersTimeoutMs: 300, idleTimeoutMs: 60_000 } });
  try {
    const { hostname, port } = new URL(s.url);
    const sock = net.connect(Number(port), hostname);
    let answer = '';
    sock.on('data', (d: Buffer) => (answer += d.toString()));
    const closed = new Promise<void>((resolve) => sock.on('close', () => resolve()));
    sock.write('GET /healthz HTTP/1.1\r\nHost: x\r\n');
    const trickle = setInterval(() => sock.writable && sock.write('X-Slow: a\r\n'), 20);
    try {
      await deadline(closed, 10_000, 'slow headers cut');
    } finally {
      clearInterval(trickle);
    }
    expect(answer).toMatch(/^HTTP\/1\.1 408 /);
  } finally {
    await s.close();
  }
});

const ORIGIN = 'https://app.example';

async function corsOf(url: string, path: string, origin = ORIGIN, init: RequestInit = {}) {
  const r = await fetch(`${url}${path}`, { ...init, headers: { origin, ...(init.headers as Record<string, string>) } });
  await r.arrayBuffer();
  return {
    status: r.status,
    origin: r.headers.get('access-control-allow-origin'),
    credentials: r.headers.get('access-control-allow-credentials'),
  };
}

describe('CORS by default: any origin echoed with credentials (legacy browser SDKs), never `null`; only /v0.2 and /healthz', () => {
  let s: Stack;
  beforeAll(async () => {
    s = await startStack({ admin: { token: 'admin-token-0123456789' } });
  });
  afterAll(() => s.close());

  test('/v0.2 and /healthz echo the origin with credentials; `null` gets nothing; preflights are answered', async () => {
    // spec/legacy-clients.md: browser clients call with credentials: "include", so `*` would fail them.
    expect(await corsOf(s.url, '/healthz')).toEqual({ status: 200, origin: ORIGIN, credentials: 'true' });
    expect(await corsOf(s.url, '/v0.2/models', ORIGIN, { headers: { authorization: `Bearer ${KEY}` } })).toEqual({
      status: 200,
      origin: ORIGIN,
      credentials: 'true',
    });
    expect(await corsOf(s.url, '/healthz', 'null')).toEqual({ status: 200, origin: null, credentials: null });
    const pre = await fetch(`${s.url}/v0.2/streams`, {
      method: 'OPTIONS',
      headers: { origin: ORIGIN, 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization,content-type' },
    });
    expect(pre.status).toBe(204);
    expect(pre.headers.get('access-control-allow-origin')).toBe(ORIGIN);
    expect(pre.headers.get('access-control-allow-credentials')).toBe('true');
    expect(pre.headers.get('access-control-allow-headers')).toContain('authorization');
  });

  test('no CORS headers on /metrics, /readyz, /admin', async () => {
    for (const path of ['/metrics', '/readyz', '/admin/deprecation']) {
      expect({ path, ...(await corsOf(s.url, path)) }).toMatchObject({ path, origin: null, credentials: null });
    }
    const pre = await fetch(`${s.url}/admin/deprecation`, {
      method: 'OPTIONS',
      headers: { origin: ORIGIN, 'access-control-request-method': 'GET' },
    });
    expect(pre.headers.get('access-control-allow-origin')).toBeNull();
  });
});

describe('CORS with credentials turned off', () => {
  let s: Stack;
  beforeAll(async () => {
    s = await startStack({ cors: { credentials: false } });
  });
  afterAll(() => s.close());

  test('any origin, `null` included, gets `*` and no credentials', async () => {
    expect(await corsOf(s.url, '/healthz')).toEqual({ status: 200, origin: '*', credentials: null });
    expect(await corsOf(s.url, '/healthz', 'null')).toEqual({ status: 200, origin: '*', credentials: null });
  });
});

describe('CORS with an allowlist and credentials', () => {
  let s: Stack;
  beforeAll(async () => {
    s = await startStack({ cors: { origins: [ORIGIN, 'null'], credentials: true } });
  });
  afterAll(() => s.close());

  test('a listed origin is echoed with credentials; others and `null` get nothing', async () => {
    expect(await corsOf(s.url, '/healthz')).toEqual({ status: 200, origin: ORIGIN, credentials: 'true' });
    expect(await corsOf(s.url, '/healthz', 'https://evil.example')).toEqual({ status: 200, origin: null, credentials: null });
    expect(await corsOf(s.url, '/healthz', 'null')).toEqual({ status: 200, origin: null, credentials: null });
  });
});

describe('/metrics protection', () => {
  test('behind a bearer token', async () => {
    const token = 'metrics-token-0123456789';
    const s = await startStack({ telemetry: { metricsToken: token } });
    try {
      const anon = await fetch(`${s.url}/metrics`);
      expect(anon.status).toBe(401);
      expect(anon.headers.get('www-authenticate')).toBe('Bearer realm="metrics"');
      expect(await anon.json()).toMatchObject({ detail: expect.any(String) });
      const ok = await fetch(`${s.url}/metrics`, { headers: { authorization: `Bearer ${token}` } });
      expect(ok.status).toBe(200);
      expect(await ok.text()).toMatch(/^gateway_http_requests_total/m);
    } finally {
      await s.close();
    }
  });

  test('on its own port, and not on the public one', async () => {
    const s = await startStack({ telemetry: { metricsPort: 0 } });
    try {
      expect(s.gateway.metricsUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      expect((await fetch(`${s.url}/metrics`)).status).toBe(404);
      const own = await fetch(`${s.gateway.metricsUrl!}/metrics`);
      expect(own.status).toBe(200);
      expect(await own.text()).toMatch(/^# TYPE gateway_upstream_up gauge$/m);
      expect((await fetch(`${s.gateway.metricsUrl!}/v0.2/models`)).status).toBe(404);
    } finally {
      await s.close();
    }
    await expect(fetch(`${s.gateway.metricsUrl!}/metrics`)).rejects.toThrow();
  });
});

describe('readiness and upstream health', () => {
  test('/readyz stays 200 with the upstream down; the periodic probe reports it as gateway_upstream_up 0', async () => {
    const clock = new FakeClock();
    const s = await startStack({ telemetry: { upstreamProbeMs: 7000 } }, { clock });
    const health = s.gateway.gateway.upstreamHealth;
    try {
      // The probe's timer is the one armed, every 7000 ms.
      expect(clock.pending).toBe(1);
      expect(clock.nextDueMs! - clock.now()).toBe(7000);
      expect(await health.check()).toBe(true);
      const gauge = async () => /^gateway_upstream_up (\d)$/m.exec(await (await fetch(`${s.url}/metrics`)).text())?.[1];
      expect(await gauge()).toBe('1');
      await s.emulator.close();
      clock.advance(7000); // the timer fires
      expect(await health.check()).toBe(false);
      expect(await gauge()).toBe('0');
      expect(await http(s.url, 'GET', '/readyz', { key: null })).toMatchObject({
        status: 200,
        body: { store: true, draining: false, upstream: false, upstream_impaired: false },
      });
    } finally {
      await s.gateway.close();
    }
    expect(clock.pending).toBe(0); // the probe's timer cleared
  });

  test('SIGTERM delay: /readyz 503 (not draining: a solo replica has no drain) while everything else still serves, then the hand-over-or-end', async () => {
    let release!: () => void;
    const waited: number[] = [];
    const s = await startStack(
      { shutdownDelayMs: 4000, shutdownGraceMs: 20_000 },
      { delay: (ms) => (waited.push(ms), new Promise<void>((r) => (release = r))) },
    );
    try {
      const closing = s.gateway.close();
      expect(waited).toEqual([4000]);
      expect(await http(s.url, 'GET', '/readyz', { key: null })).toMatchObject({ status: 503, body: { draining: false } });
      // Still serving: new legacy streams are accepted and run until the hand-over-or-end.
      const created = await http(s.url, 'POST', '/v0.2/streams', { body: frameBody({ interval_seconds: 0.3 }) });
      expect(created.status).toBe(201);
      const sock = await openResults(s.url, (created.body as { stream_id: string }).stream_id, KEY);
      await sock.waitFor(1);
      expect(s.gateway.gateway.lifecycle.state).toBe('unready');
      release();
      expect(await sock.closed).toEqual({ code: 1001, reason: 'server_shutdown' });
      await closing;
      await expect(fetch(`${s.url}/healthz`)).rejects.toThrow();
    } finally {
      await s.gateway.close();
      await s.emulator.close();
    }
  });
});

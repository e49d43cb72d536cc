/**
 * `/` and `/docs/migration` on a real gateway: what each `Accept` gets, HEAD, the headers of the
 * HTML pages, the guide in the provider profile's words, the live stream count, and not one key,
 * token or secret on either page.
 */
import http from 'node:http';
import path from 'node:path';
import { loadConfig } from '../../src/config';
import { frameBody, http as call, KEY, startStack } from '../helpers/stack';
import type { Stack } from '../helpers/stack';
import { ROOT } from '../helpers/util';

const BROWSER_ACCEPT = 'text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8';

const SECRETS = {
  admin: 'admin-token-SECRET-0001',
  metrics: 'metrics-token-SECRET-0002',
  fleet: 'gateway-secret-SECRET-0003-0123456789abcdef',
  redisPassword: 'redis-pass-SECRET-0004',
};

async function get(url: string, accept?: string, method = 'GET') {
  const res = await fetch(url, { method, headers: accept === undefined ? {} : { accept } });
  return { status: res.status, type: res.headers.get('content-type') ?? '', headers: res.headers, text: await res.text() };
}

/** A request with no `Accept` header at all (fetch always sends one). */
function getBare(url: string): Promise<{ status: number; type: string; text: string }> {
  return new Promise((resolve, reject) => {
    http
      .get(url, (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, type: String(res.headers['content-type'] ?? ''), text }));
      })
      .on('error', reject);
  });
}

describe('the default profile, with every secret configured', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({
      admin: { token: SECRETS.admin },
      telemetry: { metricsToken: SECRETS.metrics },
      // The store the stack runs on is its own (in memory); the landing page reads what is configured.
      store: { secret: SECRETS.fleet, redisUrl: `redis://gw:${SECRETS.redisPassword}@redis.internal:6379/0`, gatewayId: 'gw-landing' },
    });
  }, 60_000);
  afterAll(async () => {
    await stack?.close();
  });

  test('`/`: JSON without Accept, for */*, for application/json and for anything else; HTML for a browser', async () => {
    for (const accept of [undefined, '*/*', 'application/json', 'text/plain']) {
      const r = await get(`${stack.url}/`, accept);
      expect({ accept, status: r.status, type: r.type }).toEqual({ accept, status: 200, type: 'application/json; charset=utf-8' });
      expect(r.headers.get('vary')).toMatch(/Accept/);
      expect(r.headers.get('cache-control')).toBe('no-store');
    }
    expect((await getBare(`${stack.url}/`)).type).toMatch(/^application\/json/);
    const page = await get(`${stack.url}/`, BROWSER_ACCEPT);
    expect(page.type).toBe('text/html; charset=utf-8');
    expect(page.text).toContain('<title>Legacy gateway: /v0.2 on top of /v1beta</title>');
    expect(page.headers.get('content-security-policy')).toMatch(/^default-src 'none'; style-src 'sha256-[A-Za-z0-9+/=]+'/);
    expect(page.headers.get('x-content-type-options')).toBe('nosniff');
    expect(page.headers.get('x-request-id')).toBeTruthy();
    // As /docs: no CORS (no browser SDK calls it).
    const cross = await fetch(`${stack.url}/`, { headers: { origin: 'https://app.example.com' } });
    expect(cross.headers.get('access-control-allow-origin')).toBeNull();
  });

  test('HEAD / and a folded `//` answer like GET', async () => {
    const head = await get(`${stack.url}/`, BROWSER_ACCEPT, 'HEAD');
    expect({ status: head.status, type: head.type, text: head.text }).toEqual({ status: 200, type: 'text/html; charset=utf-8', text: '' });
    const folded = await get(`${stack.url}//`);
    expect(folded.status).toBe(200);
  });

  test('the facts: embedded emulator, the configured store without its password, a fleet member, the live legacy streams here', async () => {
    const created = await call(stack.url, 'POST', '/v0.2/streams', { body: frameBody({ interval_seconds: 5 }) });
    expect(created.status).toBe(201);
    try {
      const f = JSON.parse((await get(`${stack.url}/`)).text) as Record<string, Record<string, unknown>>;
      expect(f.upstream).toEqual({ url: stack.emulator.url, embedded_emulator: true });
      expect(f.store).toEqual({ kind: 'redis', address: 'redis://redis.internal:6379/0' });
      expect(f.fleet).toEqual({ member: true, gateway_id: 'gw-landing' });
      expect(f.legacy).toMatchObject({ live_streams_here: 1, sunset: '2026-12-31T00:00:00.000Z' });
      expect(f.links).toMatchObject({ metrics: '/metrics', metrics_needs_token: true, migration_guide: '/docs/migration' });
    } finally {
      await call(stack.url, 'DELETE', `/v0.2/streams/${(created.body as { stream_id: string }).stream_id}`);
    }
  });

  test('no key, token or secret on `/` or the guide, in either form', async () => {
    const bodies = await Promise.all([
      get(`${stack.url}/`),
      get(`${stack.url}/`, BROWSER_ACCEPT),
      get(`${stack.url}/docs/migration`),
      get(`${stack.url}/docs/migration`, BROWSER_ACCEPT),
    ]);
    const shown = bodies.map((b) => b.text).join('\n');
    for (const s of [...Object.values(SECRETS), KEY, 'SECRET']) expect({ s, found: shown.includes(s) }).toEqual({ s, found: false });
  });

  test('/docs/migration: markdown without Accept, for */* and text/markdown; HTML for a browser; ?format overrides; bad format 400', async () => {
    for (const accept of [undefined, '*/*', 'text/markdown', 'text/plain']) {
      const r = await get(`${stack.url}/docs/migration`, accept);
      expect({ accept, status: r.status, type: r.type }).toEqual({ accept, status: 200, type: 'text/markdown; charset=utf-8' });
      expect(r.headers.get('vary')).toMatch(/Accept/);
      expect(r.text).toMatch(/^# Moving from `\/v0.2` to `\/v1beta`/);
      expect(r.text).not.toContain('neutral-only');
    }
    expect((await getBare(`${stack.url}/docs/migration`)).type).toMatch(/^text\/markdown/);
    const html = await get(`${stack.url}/docs/migration`, BROWSER_ACCEPT);
    expect(html.type).toBe('text/html; charset=utf-8');
    expect(html.text).toContain('<h2 id="checklist">');
    expect(html.headers.get('content-security-policy')).toMatch(/^default-src 'none'/);
    expect((await get(`${stack.url}/docs/migration?format=html`)).type).toMatch(/^text\/html/);
    expect((await get(`${stack.url}/docs/migration?format=markdown`, BROWSER_ACCEPT)).type).toMatch(/^text\/markdown/);
    const bad = await get(`${stack.url}/docs/migration?format=pdf`);
    expect({ status: bad.status, body: JSON.parse(bad.text) as unknown }).toEqual({
      status: 400,
      body: { detail: 'format must be markdown or html' },
    });
    const head = await get(`${stack.url}/docs/migration`, BROWSER_ACCEPT, 'HEAD');
    expect({ status: head.status, type: head.type, text: head.text }).toEqual({ status: 200, type: 'text/html; charset=utf-8', text: '' });
  });

  test('the deprecation Link of /v0.2 responses names the guide, which answers in both forms', async () => {
    const r = await call(stack.url, 'GET', '/v0.2/models');
    const link = /<([^>]+)>; rel="deprecation"/.exec(r.headers.get('link') ?? '')?.[1];
    expect(link).toBe('/docs/migration');
    expect((await get(`${stack.url}${link}`, BROWSER_ACCEPT)).status).toBe(200);
    expect((await get(`${stack.url}${link}`)).status).toBe(200);
  });
});

test('under the provider profile the served guide speaks its names, at its public URL', async () => {
  const profile = loadConfig({ env: {}, file: path.join(ROOT, 'config', 'overshoot.json'), skipDefaultFile: true });
  const stack = await startStack({
    brand: profile.brand,
    brandAbbreviation: profile.brandAbbreviation,
    thirdPartyBackend: profile.thirdPartyBackend,
    roomVendor: profile.roomVendor,
    publicUrl: 'https://gateway.customer.example',
    deprecation: { date: '2026-03-01T00:00:00Z', sunset: '2027-01-31T00:00:00Z' },
  });
  try {
    const md = (await get(`${stack.url}/docs/migration`)).text;
    expect(md).toContain("const BASE = 'https://gateway.customer.example';");
    expect(md).toContain('ovs://streams/');
    expect(md).toContain('X-Overshoot-Region');
    expect(md).toContain('Sunset: Sun, 31 Jan 2027 00:00:00 GMT');
    expect(md).not.toMatch(/svc/i);
    const html = (await get(`${stack.url}/docs/migration`, BROWSER_ACCEPT)).text;
    expect(html).toContain('<code>ovs://streams/{id}?…</code>');
    const f = JSON.parse((await get(`${stack.url}/`)).text) as { public_url: string; legacy: { sunset: string } };
    expect(f).toMatchObject({ public_url: 'https://gateway.customer.example', legacy: { sunset: '2027-01-31T00:00:00.000Z' } });
  } finally {
    await stack.close();
  }
}, 60_000);

/**
 * The passthrough's edge rules against a scripted upstream on a real socket: dot-segment paths
 * refused before anything is forwarded, request id and traceparent on the upstream leg, and query
 * values never reaching a log line (passthrough access lines, its warnings, Express routes).
 */
import type http from 'node:http';
import { createLogger } from '../../src/lib/logger';
import { redactQuery } from '../../src/gateway/telemetry/http';
import type { RunningGateway } from '../../src/gateway/server';
import { gatewayOn, rawRequest, startRawUpstream } from './doubles';
import type { RawUpstream } from './doubles';
import { deadline, sleep } from '../helpers/time';

interface Line {
  msg?: string;
  level?: number;
  time?: string;
  reqId?: string;
  url?: string;
  req?: { method: string; url: string; remoteAddress?: string };
  res?: { statusCode: number };
}

/** An upstream's own request id that JSON must escape (quotes, a backslash, non-ASCII). */
const ODD_ID = 'odd "quoted" \\ id \u00e9';

describe('passthrough edge', () => {
  let up: RawUpstream;
  let gw: RunningGateway;
  const seen: { url?: string; headers: http.IncomingHttpHeaders }[] = [];
  const logs: string[] = [];
  const lines = () =>
    logs
      .join('')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as Line);
  /** Waits (bounded) until a log line matches: access lines are written after the response closes. */
  const lineWhere = (pred: (l: Line) => boolean, what: string) =>
    deadline(
      (async () => {
        for (;;) {
          const l = lines().find(pred);
          if (l) return l;
          await sleep(10);
        }
      })(),
      3000,
      what,
    );

  beforeAll(async () => {
    up = await startRawUpstream((req, res) => {
      seen.push({ url: req.url, headers: req.headers });
      req.resume();
      if (req.url?.startsWith('/v1beta/reset')) {
        res.socket?.destroy();
        return;
      }
      const ownId = req.url === '/v1beta/own-id' ? 'upstream-7' : req.url?.startsWith('/v1beta/odd-id') ? ODD_ID : undefined;
      res.writeHead(200, { 'content-type': 'application/json', ...(ownId ? { 'x-request-id': ownId } : {}) });
      res.end('{"ok":true}');
    });
    // The gateway's own upstream-health probe (GET /v1beta/models at start, then every
    // upstreamProbeMs) is not passthrough traffic: let the first one land before the tests clear
    // `seen`, and keep the next out of this file's window (the probe is tested in deploy.test.ts).
    gw = await gatewayOn(
      up.url,
      { telemetry: { upstreamProbeMs: 3_600_000 } },
      createLogger('info', 'gateway', { write: (s: string) => void logs.push(s) }),
    );
    await gw.gateway.upstreamHealth.check();
  });
  afterAll(async () => {
    await gw.close();
    await up.close();
  });
  beforeEach(() => {
    seen.length = 0;
  });

  test.each([
    '/v1beta/../admin/deprecation',
    '/v1beta/%2e%2e/admin',
    '/v1beta/.%2E/x',
    '/v1beta/%2E./x',
    '/v1beta/./models',
    '/v1beta/models/..',
    '/v1beta/streams/%2e',
    '/billing/pricing/local%2f..%2fsecret',
    '/billing/pricing/local%5C..%5Csecret',
    '/billing/pricing/local\\..\\secret',
    '//v1beta//..//x?y=1',
  ])('%s → 400 {detail}, nothing forwarded', async (path) => {
    const r = await rawRequest(gw.url, { path });
    expect(r.status).toBe(400);
    expect(JSON.parse(r.body)).toEqual({ detail: expect.stringMatching(/segments/) });
    expect(r.headers['x-request-id']).toMatch(/^[\w-]+$/);
    expect(seen).toEqual([]);
  });

  test("a refused path's access line still names the client, its connection closed by then", async () => {
    const r = await rawRequest(gw.url, { path: '/v1beta/a/../b', headers: { connection: 'close' } });
    expect(r.status).toBe(400);
    const line = await lineWhere((l) => l.reqId === r.headers['x-request-id'] && !!l.req, 'the refused path access line');
    expect(line.req).toEqual({ method: 'GET', url: '/v1beta/a/../b', remoteAddress: '127.0.0.1' });
  });

  test('dots that are not whole segments, and dots in the query, pass', async () => {
    for (const path of [
      '/v1beta/models/...',
      '/billing/pricing/local/analyzer.v2',
      '/v1beta/.well-known/x',
      '/v1beta/a..b',
      '/v1beta/models?next=../x',
    ]) {
      const r = await rawRequest(gw.url, { path });
      expect({ path, status: r.status }).toEqual({ path, status: 200 });
    }
    expect(seen.map((s) => s.url)).toEqual([
      '/v1beta/models/...',
      '/billing/pricing/local/analyzer.v2',
      '/v1beta/.well-known/x',
      '/v1beta/a..b',
      '/v1beta/models?next=../x',
    ]);
  });

  test('the request id reaches the upstream and the client: the caller’s own when well-formed, else a generated one', async () => {
    const own = await rawRequest(gw.url, { path: '/v1beta/models', headers: { 'x-request-id': 'caller-id.1:2' } });
    expect(own.headers['x-request-id']).toBe('caller-id.1:2');
    expect(seen[0]!.headers['x-request-id']).toBe('caller-id.1:2');

    const none = await rawRequest(gw.url, { path: '/v1beta/models' });
    expect(none.headers['x-request-id']).toMatch(/^[\w-]{8,}$/);
    expect(seen[1]!.headers['x-request-id']).toBe(none.headers['x-request-id']);

    const bad = await rawRequest(gw.url, { path: '/v1beta/models', headers: { 'x-request-id': 'has spaces {and} more' } });
    expect(bad.headers['x-request-id']).not.toBe('has spaces {and} more');
    expect(seen[2]!.headers['x-request-id']).toBe(bad.headers['x-request-id']);
    // One id upstream, never the caller's and ours side by side.
    expect(typeof seen[2]!.headers['x-request-id']).toBe('string');
  });

  test('an upstream answering with its own request id: that one reaches the client, once, and the access line', async () => {
    const r = await rawRequest(gw.url, { path: '/v1beta/own-id' });
    expect(r.rawHeaders.filter((h) => h.toLowerCase() === 'x-request-id')).toHaveLength(1);
    expect(r.headers['x-request-id']).toBe('upstream-7');
    expect(seen[0]!.headers['x-request-id']).toMatch(/^[\w-]{8,}$/);
    await lineWhere((l) => l.reqId === 'upstream-7' && !!l.req, 'access line with the upstream id');
  });

  test('the passthrough access line: one JSON line of fixed fields, every string escaped', async () => {
    const r = await rawRequest(gw.url, { method: 'DELETE', path: '/v1beta/odd-id?key=v"1' });
    expect(r.headers['x-request-id']).toBe(ODD_ID);
    const raw = await deadline(
      (async () => {
        for (;;) {
          const l = logs
            .join('')
            .split('\n')
            .find((x) => x.includes('"url":"/v1beta/odd-id'));
          if (l) return l;
          await sleep(10);
        }
      })(),
      3000,
      'odd-id access line',
    );
    const line = JSON.parse(raw) as Record<string, unknown>;
    expect(Object.keys(line)).toEqual(['level', 'time', 'service', 'name', 'reqId', 'req', 'res', 'responseTime', 'msg']);
    expect(line).toEqual({
      level: 30,
      time: expect.stringMatching(/^\d{4}-\d\d-\d\dT[\d:.]+Z$/),
      service: 'gateway',
      name: 'gateway',
      reqId: r.headers['x-request-id'],
      req: { method: 'DELETE', url: '/v1beta/odd-id?key=[redacted]', remoteAddress: '127.0.0.1' },
      res: { statusCode: 200 },
      responseTime: expect.any(Number),
      msg: `DELETE /v1beta/odd-id?key=[redacted] 200 ${String(line.responseTime)}ms`,
    });
    expect(Math.abs(Date.parse(line.time as string) - Date.now())).toBeLessThan(3_600_000);
  });

  test('request counts are exact at every scrape: added once, never twice', async () => {
    const scrape = async () => {
      const text = (await rawRequest(gw.url, { path: '/metrics' })).body;
      const count = (re: RegExp) => Number(re.exec(text)?.[1] ?? 0);
      return {
        http: count(/^gateway_http_requests_total\{method="GET",route="\/billing\/pricing\/:model",status="200"\} (\d+)$/m),
        passthrough: count(/^gateway_passthrough_requests_total\{prefix="billing",outcome="ok"\} (\d+)$/m),
      };
    };
    const before = await scrape();
    for (let i = 0; i < 3; i++) expect((await rawRequest(gw.url, { path: `/billing/pricing/m${i}` })).status).toBe(200);
    // The access line is written when the response closes: wait for the last one, then read.
    await lineWhere((l) => l.req?.url === '/billing/pricing/m2', 'last access line');
    expect(await scrape()).toEqual({ http: before.http + 3, passthrough: before.passthrough + 3 });
    expect(await scrape()).toEqual({ http: before.http + 3, passthrough: before.passthrough + 3 });
    await rawRequest(gw.url, { path: '/billing/pricing/m3' });
    await lineWhere((l) => l.req?.url === '/billing/pricing/m3', 'access line');
    expect(await scrape()).toEqual({ http: before.http + 4, passthrough: before.passthrough + 4 });
  });

  test('W3C traceparent and tracestate pass through as sent; absent, none is made up', async () => {
    const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    await rawRequest(gw.url, { path: '/billing/pricing', headers: { traceparent, tracestate: 'vendor=x' } });
    expect(seen[0]!.headers.traceparent).toBe(traceparent);
    expect(seen[0]!.headers.tracestate).toBe('vendor=x');
    await rawRequest(gw.url, { path: '/billing/pricing' });
    expect(seen[1]!.headers.traceparent).toBeUndefined();
  });

  test('query values never reach a log: passthrough access lines, passthrough warnings, Express routes', async () => {
    const secret = 'svc-SECRETVALUE123';
    const ok = await rawRequest(gw.url, { path: `/v1beta/models?token=${secret}&limit=5&${secret}` });
    expect(ok.status).toBe(200);
    // The upstream gets the query unchanged; only logs are redacted.
    expect(seen[0]!.url).toBe(`/v1beta/models?token=${secret}&limit=5&${secret}`);
    const access = await lineWhere((l) => l.reqId === ok.headers['x-request-id'] && !!l.req, 'passthrough access line');
    expect(access.req!.url).toBe('/v1beta/models?token=[redacted]&limit=[redacted]&[redacted]');
    expect(access.msg).toBe(
      'GET /v1beta/models?token=[redacted]&limit=[redacted]&[redacted] 200 ' +
        String((access as { responseTime?: number }).responseTime) +
        'ms',
    );

    const reset = await rawRequest(gw.url, { path: `/v1beta/reset?api_key=${secret}` });
    expect(reset.status).toBe(502);
    const warn = await lineWhere(
      (l) => l.reqId === reset.headers['x-request-id'] && l.msg === 'upstream unreachable',
      'passthrough warning',
    );
    expect(warn.url).toBe('/v1beta/reset?api_key=[redacted]');

    const express = await rawRequest(gw.url, { path: `/no-such-route?token=${secret}` });
    expect(express.status).toBe(404);
    const expressLine = await lineWhere((l) => l.reqId === express.headers['x-request-id'] && !!l.req, 'express access line');
    expect(expressLine.req!.url).toBe('/no-such-route?token=[redacted]');

    const legacy = await rawRequest(gw.url, { path: `/v0.2/models?token=${secret}` });
    await lineWhere((l) => l.reqId === legacy.headers['x-request-id'] && !!l.req, 'legacy access line');
    expect(logs.join('')).not.toContain(secret);
  });
});

test('redactQuery keeps paths and parameter names, replaces every value', () => {
  expect(redactQuery('/v1beta/models')).toBe('/v1beta/models');
  expect(redactQuery('/a?')).toBe('/a?');
  expect(redactQuery('/a?x=1&y=&z')).toBe('/a?x=[redacted]&y=[redacted]&[redacted]');
  expect(redactQuery('/a?token=abc#frag')).toBe('/a?token=[redacted]');
  expect(redactQuery('/a?k=v=w')).toBe('/a?k=[redacted]');
});

/**
 * Every line one gateway writes, for Express routes and for proxied calls alike, through one pino
 * logger: the same fields with the same JSON types (a typed log pipeline maps a field once), time
 * as ISO 8601 everywhere.
 */
import { createLogger } from '../../../src/lib/logger';
import type { RunningGateway } from '../../../src/gateway/server';
import { gatewayOn, rawRequest, startRawUpstream } from '../doubles';
import type { RawUpstream } from '../doubles';
import { deadline, sleep } from '../../helpers/time';

type Line = Record<string, unknown>;

/** Each field's JSON type by its path (`req.url: string`), nested objects walked. */
function shape(value: unknown, path = ''): Record<string, string> {
  if (value === null || typeof value !== 'object' || Array.isArray(value))
    return { [path]: value === null ? 'null' : Array.isArray(value) ? 'array' : typeof value };
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(value)) Object.assign(out, shape(v, path ? `${path}.${k}` : k));
  return out;
}

describe('access lines', () => {
  let up: RawUpstream;
  let gw: RunningGateway;
  const written: string[] = [];
  const lines = () =>
    written
      .join('')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as Line);
  const accessLine = (url: string) =>
    deadline(
      (async () => {
        for (;;) {
          const l = lines().find((x) => (x.req as { url?: string } | undefined)?.url === url && x.res !== undefined);
          if (l) return l;
          await sleep(10);
        }
      })(),
      3000,
      `access line of ${url}`,
    );

  beforeAll(async () => {
    up = await startRawUpstream((req, res) => {
      req.resume();
      if (req.url?.startsWith('/v1beta/reset')) return void res.socket?.destroy();
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"ok":true}');
    });
    gw = await gatewayOn(
      up.url,
      { telemetry: { upstreamProbeMs: 3_600_000 } },
      createLogger('info', 'gateway', { write: (s: string) => void written.push(s) }),
    );
  });
  afterAll(async () => {
    await gw.close();
    await up.close();
  });

  test('an Express route’s line and a proxied call’s line have the same fields of the same types; every line’s time is ISO 8601', async () => {
    expect((await rawRequest(gw.url, { path: '/no-such-route?k=v' })).status).toBe(404);
    expect((await rawRequest(gw.url, { path: '/v1beta/models?k=v' })).status).toBe(200);
    expect((await rawRequest(gw.url, { path: '/v1beta/reset' })).status).toBe(502);
    const express = await accessLine('/no-such-route?k=[redacted]');
    const proxied = await accessLine('/v1beta/models?k=[redacted]');
    const failed = await accessLine('/v1beta/reset');

    expect(shape(proxied)).toEqual(shape(express));
    expect(shape(failed)).toEqual(shape(express));
    expect(shape(express)).toEqual({
      level: 'number',
      time: 'string',
      service: 'string',
      name: 'string',
      reqId: 'string',
      'req.method': 'string',
      'req.url': 'string',
      'req.remoteAddress': 'string',
      'res.statusCode': 'number',
      responseTime: 'number',
      msg: 'string',
    });
    expect(proxied).toMatchObject({ level: 30, req: { method: 'GET', remoteAddress: '127.0.0.1' }, res: { statusCode: 200 } });
    expect(failed).toMatchObject({ level: 40, res: { statusCode: 502 } });

    const all = lines();
    expect(all.length).toBeGreaterThan(3);
    for (const l of all) {
      expect(l.time).toEqual(expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/));
      expect(shape({ level: l.level, time: l.time, service: l.service, name: l.name, msg: l.msg })).toEqual(
        shape({ level: 0, time: '', service: '', name: '', msg: '' }),
      );
    }
  });

  test('a proxied call’s key, in its Authorization header or its query, is in no line', async () => {
    const key = 'svc-access-line-secret-0123456789';
    const path = `/v1beta/models?api_key=${key}&token=${key}`;
    const res = await rawRequest(gw.url, { path, headers: { authorization: `Bearer ${key}`, 'x-api-key': key } });
    expect(res.status).toBe(200);
    await accessLine('/v1beta/models?api_key=[redacted]&token=[redacted]');
    expect(written.join('')).not.toContain(key);
  });
});

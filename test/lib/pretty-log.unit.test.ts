/**
 * The pretty format (a person at a terminal): a line's fields on its own line, an access line as
 * `METHOD path status ms`, the boot line as a short summary, an unexpected error's stack below its
 * line, and a client's control characters escaped.
 */
import { PassThrough } from 'node:stream';
import { createLogger, prettyDestination } from '../../src/lib/logger';

function pretty() {
  const out = new PassThrough();
  let text = '';
  out.on('data', (d: Buffer) => (text += d.toString()));
  const log = createLogger('info', 'gateway', prettyDestination(false, out));
  /** What was written, its `[time] LEVEL (name): ` heads left out. */
  const lines = () =>
    text
      .split('\n')
      .filter(Boolean)
      .map((l) => l.replace(/^\[\d\d:\d\d:\d\d\.\d{3}\] /, ''));
  return { log, lines };
}

describe('prettyMessage', () => {
  test('a plain line: the message, then its fields as key=value on the same line; nothing the message says twice', () => {
    const { log, lines } = pretty();
    log.info({ streamId: 's-1', reason: 'client_requested', n: 3, obj: { a: 1 }, text: 'two words' }, 'legacy stream ended');
    log.info({ upstream: 'http://up.example:8081' }, 'upstream probe: http://up.example:8081 reachable');
    expect(lines()).toEqual([
      'INFO (gateway): legacy stream ended · streamId=s-1 reason=client_requested n=3 obj={"a":1} text="two words"',
      'INFO (gateway): upstream probe: http://up.example:8081 reachable',
    ]);
  });

  test('an access line: one line with the full path, status, time, the error answered, address and request id', () => {
    const { log, lines } = pretty();
    const req = { method: 'POST', url: '/v0.2/streams', remoteAddress: '10.0.0.7' };
    log.warn(
      {
        reqId: '9a59b7ad-cdcd-4d98-8fa6-36cfb4ce9342',
        req,
        res: { statusCode: 503 },
        responseTime: 17,
        traceId: 't'.repeat(32),
        error: { code: 'model_unavailable', model: 'local/offline' },
      },
      'POST /v0.2/streams 503 17ms',
    );
    log.info({ reqId: 'abc', req, res: { statusCode: 201 }, responseTime: 4 }, 'POST /v0.2/streams 201 4ms');
    expect(lines()).toEqual([
      'WARN (gateway): POST /v0.2/streams 503 17ms · model_unavailable model=local/offline · 10.0.0.7 · 9a59b7ad',
      'INFO (gateway): POST /v0.2/streams 201 4ms · 10.0.0.7 · abc',
    ]);
  });

  test('an unexpected error: its message on the line, its stack below it', () => {
    const { log, lines } = pretty();
    const err = new Error('boom');
    log.error({ err, path: '/x' }, 'unhandled error');
    const [head, ...stack] = lines();
    expect(head).toBe('ERROR (gateway): unhandled error · err=boom path=/x');
    expect(stack[0]).toBe('    Error: boom');
    expect(stack[1]).toMatch(/^ {8}at /);
  });

  test('the gateway boot line: a summary of at most 8 lines, one topic a line', () => {
    const { log, lines } = pretty();
    log.info(
      {
        url: 'http://0.0.0.0:8080',
        port: 8080,
        upstream: 'https://api.example',
        embeddedEmulator: null,
        config: { files: ['/app/config/default.json'], env: ['PORT', 'REDIS_URL'] },
        brand: {
          keyPrefix: 'ovs-',
          scheme: 'ovs://',
          backends: ['overshoot', 'gemini'],
          responseField: 'overshoot',
          regionHeader: 'X-Overshoot-Region',
          roomVendor: 'livekit',
        },
        legacyLeaseSeconds: 45,
        deprecation: { date: '2026-03-01', sunset: '2027-03-01', afterSunset: 'refuse', brownouts: { schedule: [], windows: [{}] } },
        metrics: '/metrics',
        metricsUrl: 'http://0.0.0.0:9464',
        adminReport: null,
        store: 'redis',
        storeUrl: 'redis://redis.internal:6379',
        gatewayId: 'gw-1',
        fleet: true,
        tracing: { protocol: 'http/protobuf', endpoint: 'http://otel:4318', sampler: 'parentbased_always_on' },
      },
      'gateway listening on http://0.0.0.0:8080 (port 8080); upstream https://api.example; config /app/config/default.json',
    );
    expect(lines()).toEqual([
      'INFO (gateway): gateway listening on http://0.0.0.0:8080',
      '    upstream https://api.example',
      '    store    redis://redis.internal:6379, fleet member (replica gw-1)',
      '    metrics  http://0.0.0.0:9464/metrics · admin report off · tracing http/protobuf to http://otel:4318 (parentbased_always_on)',
      '    profile  overshoot: keys ovs-…, ovs://, X-Overshoot-Region, rooms livekit, backends overshoot + gemini',
      '    legacy   lease 45 s · deprecated 2026-03-01 · sunset 2027-03-01 (then refuse) · 1 brownout entries',
      '    config   /app/config/default.json + env PORT, REDIS_URL',
    ]);
  });

  test('control characters a client sent are escaped: they cannot move the cursor or start a line', () => {
    const { log, lines } = pretty();
    log.info({ streamId: 'a\nb\u001b[2J' }, 'results socket refused: stream_not_found (1008)');
    log.info(
      { reqId: 'r', req: { method: 'GET', url: '/x\u001b[31m', remoteAddress: '::1' }, res: { statusCode: 404 }, responseTime: 1 },
      'GET /x\u001b[31m 404 1ms',
    );
    expect(lines()).toEqual([
      'INFO (gateway): results socket refused: stream_not_found (1008) · streamId="a\\nb\\u001b[2J"',
      'INFO (gateway): GET /x\\u001b[31m 404 1ms · ::1 · r',
    ]);
  });
});

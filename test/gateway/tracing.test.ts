/**
 * OpenTelemetry traces of one gateway process (the real CLI, embedded emulator) exported over
 * OTLP/HTTP (`http/json`) to a real receiver: a legacy stream's create in the caller's trace, its
 * ticks (each its own trace, linked to the create), keepalives, the end, a passthrough request with
 * its upstream leg; the trace context reaching the upstream; no key or token in any attribute; the
 * access lines' trace ids with tracing on and off.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { mergeDeep } from '../../src/config';
import { keyHash } from '../../src/lib/keys';
import { runMain, useMainBundle } from '../helpers/main-bundle';
import type { MainProcess } from '../helpers/main-bundle';
import { attributeStrings, startOtlpReceiver } from '../helpers/otlp-receiver';
import type { OtlpReceiver, ReceivedSpan } from '../helpers/otlp-receiver';
import { KEY, frameBody } from '../helpers/stack';
import { openResults } from '../helpers/results-socket';
import { deadline, until } from '../helpers/time';
import { ROOT } from '../helpers/util';

const bundle = useMainBundle();
let receiver: OtlpReceiver;
let dir: string;
let configFile: string;

beforeAll(async () => {
  receiver = await startOtlpReceiver();
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-tracing-'));
  configFile = path.join(dir, 'config.json');
  // The shipped accounts (the bundle runs from a temp dir), and an upstream keepalive every second.
  const defaults = JSON.parse(fs.readFileSync(path.join(ROOT, 'config', 'default.json'), 'utf8')) as Record<string, unknown>;
  fs.writeFileSync(configFile, JSON.stringify(mergeDeep(defaults, { legacy: { upstreamKeepaliveSeconds: 1 } })));
});
afterAll(async () => {
  await receiver.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

const BASE_ENV = { PORT: '0', HOST: '127.0.0.1', EMULATOR_PORT: '0', GATEWAY_ID: 'replica-1', LOG_LEVEL: 'info' };

async function boot(env: Record<string, string>): Promise<{ proc: MainProcess; url: string }> {
  const proc = runMain(bundle(), ['serve', '--config', configFile], { ...BASE_ENV, ...env });
  const line = await deadline(proc.line('gateway listening'), 30_000, `boot (stderr: ${proc.stderr()})`);
  return { proc, url: String(line.url) };
}

async function stop(proc: MainProcess): Promise<void> {
  proc.child.kill('SIGTERM');
  await deadline(proc.exited, 20_000, 'exit');
}

const traceparent = (traceId: string, spanId: string) => `00-${traceId}-${spanId}-01`;

function call(url: string, method: string, p: string, headers: Record<string, string>, body?: unknown) {
  return fetch(`${url}${p}`, {
    method,
    headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json', ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
}

/** Waits until `pred` holds over the spans received so far, then returns those matching `pick`. */
async function spansWhen(pred: (spans: ReceivedSpan[]) => boolean, what: string): Promise<ReceivedSpan[]> {
  await deadline(
    until(() => pred(receiver.spans)),
    20_000,
    `${what} (${receiver.spans.length} spans so far: ${[...new Set(receiver.spans.map((s) => s.name))].join(', ')})`,
  );
  return receiver.spans;
}

const named = (spans: ReceivedSpan[], name: string, streamId?: string) =>
  spans.filter((s) => s.name === name && (streamId === undefined || s.attributes['legacy.stream_id'] === streamId));

const childrenOf = (spans: ReceivedSpan[], parent: ReceivedSpan) =>
  spans.filter((s) => s.traceId === parent.traceId && s.parentSpanId === parent.spanId);

/** Whether `ancestor` is `s`'s parent, grandparent, … (same trace). */
function descendsFrom(spans: ReceivedSpan[], s: ReceivedSpan, ancestor: ReceivedSpan): boolean {
  const byId = new Map(spans.filter((x) => x.traceId === s.traceId).map((x) => [x.spanId, x]));
  for (let p = byId.get(s.parentSpanId); p; p = byId.get(p.parentSpanId)) if (p.spanId === ancestor.spanId) return true;
  return false;
}

const SERVER = 2;
const CLIENT = 3;

describe('tracing on (http/json, always on)', () => {
  const CREATE_TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
  const KEEPALIVE_TRACE = '5bf92f3577b34da6a3ce929d0e0e4737';
  const PASSTHROUGH_TRACE = '6bf92f3577b34da6a3ce929d0e0e4738';
  const DELETE_TRACE = '7bf92f3577b34da6a3ce929d0e0e4739';
  /** Two passthrough calls at once: each access line must carry its own request's span. */
  const PARALLEL_TRACES = ['8bf92f3577b34da6a3ce929d0e0e4731', '9bf92f3577b34da6a3ce929d0e0e4732'];
  const CALLER = '00f067aa0ba902b7';
  const ROOM_SECRET = 'room-token-that-must-not-leak';

  let proc: MainProcess;
  let streamId: string;
  let publishToken: string;
  let resultIds: string[];
  let spans: ReceivedSpan[];

  beforeAll(async () => {
    receiver.spans.length = 0;
    let url: string;
    ({ proc, url } = await boot({
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_BSP_SCHEDULE_DELAY: '100',
      OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment=test',
    }));
    const created = await call(
      url,
      'POST',
      '/v0.2/streams',
      { traceparent: traceparent(CREATE_TRACE, CALLER) },
      frameBody({ interval_seconds: 0.5 }),
    );
    expect(created.status).toBe(201);
    const body = (await created.json()) as { stream_id: string; room: { token: string } };
    streamId = body.stream_id;
    publishToken = body.room.token;
    const socket = await openResults(url, streamId, KEY);
    resultIds = (await socket.waitFor(3, 20_000)).map((m) => String(m.id));
    expect(
      (await call(url, 'POST', `/v0.2/streams/${streamId}/keepalive`, { traceparent: traceparent(KEEPALIVE_TRACE, CALLER) })).status,
    ).toBe(200);
    // A passthrough call with a token in its query: the span keeps the parameter's name only.
    const balance = await call(url, 'GET', `/billing/accounts/me/balance?access_token=${ROOM_SECRET}`, {
      traceparent: traceparent(PASSTHROUGH_TRACE, CALLER),
    });
    expect(balance.status).toBe(200);
    const parallel = await Promise.all(
      PARALLEL_TRACES.map((t) => call(url, 'GET', '/v1beta/models', { traceparent: traceparent(t, CALLER) })),
    );
    expect(parallel.map((r) => r.status)).toEqual([200, 200]);
    await spansWhen((s) => named(s, 'legacy.upstream_keepalive', streamId).length > 0, 'an upstream keepalive of the gateway');
    expect((await call(url, 'DELETE', `/v0.2/streams/${streamId}`, { traceparent: traceparent(DELETE_TRACE, CALLER) })).status).toBe(200);
    await deadline(socket.closed, 10_000, 'socket closed at the end');
    spans = await spansWhen(
      (s) =>
        named(s, 'legacy.end', streamId).length > 0 &&
        [PASSTHROUGH_TRACE, ...PARALLEL_TRACES].every((t) => s.some((x) => x.traceId === t && x.name === 'passthrough.upstream')),
      'the end and the passthrough legs',
    );
  }, 90_000);
  afterAll(async () => {
    if (proc) await stop(proc);
  });

  test("the create is in the caller's trace: the slot, the upstream create and the record are its children", () => {
    const [create] = named(spans, 'legacy.create');
    expect(create).toBeDefined();
    expect(create!.traceId).toBe(CREATE_TRACE);
    expect(create!.attributes).toMatchObject({
      'legacy.stream_id': streamId,
      'gateway.replica_id': 'replica-1',
      'gateway.key_hash': keyHash(KEY),
      'legacy.mode': 'frame',
      'legacy.transport': 'native',
    });
    const server = spans.find((s) => s.kind === SERVER && s.traceId === CREATE_TRACE && s.parentSpanId === CALLER)!;
    expect(server.name).toBe('POST /v0.2/streams');
    expect(descendsFrom(spans, create!, server)).toBe(true);
    const children = childrenOf(spans, create!);
    expect(children.map((c) => c.name)).toEqual(expect.arrayContaining(['store.acquireSlot', 'store.putRecord', 'store.bindSlot', 'POST']));
    const upstreamCreate = children.find((c) => c.name === 'POST' && String(c.attributes['url.full']).endsWith('/v1beta/streams'))!;
    expect(upstreamCreate.kind).toBe(CLIENT);
    // The upstream (the embedded emulator) got the create's trace context: its server span is the call's child.
    const upstreamSide = spans.find((s) => s.kind === SERVER && s.parentSpanId === upstreamCreate.spanId);
    expect(upstreamSide?.traceId).toBe(CREATE_TRACE);
  });

  test('each tick is a trace linked to the create: the completion, the commit and the fan-out to the socket inside', () => {
    const [create] = named(spans, 'legacy.create');
    const ticks = named(spans, 'legacy.tick', streamId).filter((t) => t.attributes['legacy.tick.outcome'] === 'ok');
    expect(ticks.length).toBeGreaterThanOrEqual(3);
    expect(ticks.map((t) => t.attributes['legacy.result_id'])).toEqual(expect.arrayContaining(resultIds));
    for (const tick of ticks) {
      expect(tick.traceId).not.toBe(CREATE_TRACE);
      expect(tick.parentSpanId).toBe('');
      expect(tick.links).toEqual([expect.objectContaining({ traceId: CREATE_TRACE, spanId: create!.spanId })]);
      expect(tick.attributes).toMatchObject({
        'gateway.replica_id': 'replica-1',
        'legacy.tick': expect.any(Number),
        'legacy.tick.lateness_ms': expect.any(Number),
        'legacy.model': 'local/analyzer',
      });
      const inside = spans.filter((s) => s.traceId === tick.traceId && descendsFrom(spans, s, tick));
      const completion = inside.find((s) => s.name === 'POST' && String(s.attributes['url.full']).endsWith('/v1beta/chat/completions'));
      expect(completion).toMatchObject({
        kind: CLIENT,
        parentSpanId: tick.spanId,
        attributes: expect.objectContaining({ 'legacy.stream_id': streamId }),
      });
      expect(inside.find((s) => s.name === 'store.commitTick')).toMatchObject({ parentSpanId: tick.spanId });
      expect(inside.find((s) => s.name === 'legacy.results.fanout')?.attributes).toMatchObject({
        'legacy.results.sockets': 1,
        'legacy.results.shed': 0,
        'legacy.stream_id': streamId,
        'legacy.result_id': tick.attributes['legacy.result_id'],
      });
    }
  });

  test("the client's keepalive in its trace, the gateway's own upstream keepalive linked to the create, the end with its reason", () => {
    const [create] = named(spans, 'legacy.create');
    expect(named(spans, 'legacy.keepalive', streamId)).toEqual([
      expect.objectContaining({
        traceId: KEEPALIVE_TRACE,
        links: [expect.objectContaining({ spanId: create!.spanId })],
        attributes: expect.objectContaining({ 'gateway.key_hash': keyHash(KEY) }),
      }),
    ]);
    const renewal = named(spans, 'legacy.upstream_keepalive', streamId)[0]!;
    expect(renewal.links).toEqual([expect.objectContaining({ traceId: CREATE_TRACE, spanId: create!.spanId })]);
    expect(
      childrenOf(spans, renewal).map((c) => [c.name, String(c.attributes['url.full']).replace(/^.*\/v1beta/, '/v1beta')]),
    ).toContainEqual(['POST', `/v1beta/streams/${streamId}/keepalive`]);
    const [end] = named(spans, 'legacy.end', streamId);
    expect(end).toMatchObject({
      traceId: DELETE_TRACE,
      attributes: expect.objectContaining({ 'legacy.end_reason': 'client_requested', 'legacy.end.won': true }),
    });
    expect(spans.filter((s) => s.traceId === DELETE_TRACE && descendsFrom(spans, s, end!)).map((s) => s.name)).toEqual(
      expect.arrayContaining(['store.endStream', 'DELETE']),
    );
  });

  test('a passthrough request: the server span named by its route, the upstream leg its child, the trace carried upstream', () => {
    const server = spans.find((s) => s.traceId === PASSTHROUGH_TRACE && s.kind === SERVER && s.parentSpanId === CALLER)!;
    expect(server.name).toBe('GET /billing/accounts/me/balance');
    expect(server.attributes).toMatchObject({
      'gateway.passthrough.prefix': 'billing',
      'gateway.key_hash': keyHash(KEY),
      'url.query': 'access_token=[redacted]',
    });
    const leg = named(spans, 'passthrough.upstream').find((s) => s.traceId === PASSTHROUGH_TRACE)!;
    expect(leg).toMatchObject({ kind: CLIENT, parentSpanId: server.spanId });
    expect(leg.attributes).toMatchObject({
      'http.response.status_code': 200,
      'gateway.passthrough.outcome': 'ok',
      'url.full': expect.stringMatching(/\/billing\/accounts\/me\/balance\?access_token=\[redacted\]$/),
    });
    const upstreamSide = spans.find((s) => s.kind === SERVER && s.parentSpanId === leg.spanId);
    expect(upstreamSide?.traceId).toBe(PASSTHROUGH_TRACE);
  });

  test('every span carries the replica id (and the resource says which service and replica); the stream spans carry the stream id', () => {
    for (const s of spans) expect([s.name, s.attributes['gateway.replica_id']]).toEqual([s.name, 'replica-1']);
    expect(spans[0]!.resource).toMatchObject({
      'service.name': 'legacy-gateway',
      'service.instance.id': 'replica-1',
      'deployment.environment': 'test',
    });
    for (const name of [
      'legacy.create',
      'legacy.tick',
      'legacy.keepalive',
      'legacy.upstream_keepalive',
      'legacy.end',
      'legacy.results.fanout',
      'store.commitTick',
    ]) {
      const all = spans.filter((s) => s.name === name);
      expect([name, all.length > 0, all.every((s) => s.attributes['legacy.stream_id'] === streamId)]).toEqual([name, true, true]);
    }
  });

  test('no API key, publish token or query value in any attribute', () => {
    expect(spans.length).toBeGreaterThan(20);
    for (const s of spans) {
      for (const v of attributeStrings(s)) {
        expect([s.name, v.includes(KEY)]).toEqual([s.name, false]);
        expect([s.name, v.includes(publishToken)]).toEqual([s.name, false]);
        expect([s.name, v.includes(ROOM_SECRET)]).toEqual([s.name, false]);
      }
    }
  });

  test('access lines carry the trace id: the Express path and the passthrough', () => {
    const access = (url: RegExp) =>
      proc.lines.find((l) => (l.req as { url?: string } | undefined)?.url?.match(url) && l.responseTime !== undefined);
    expect(access(/^\/v0\.2\/streams$/)).toMatchObject({ traceId: CREATE_TRACE });
    expect(access(/^\/billing\/accounts\/me\/balance/)).toMatchObject({ traceId: PASSTHROUGH_TRACE });
    // Written after the response, in batches: each line still names its own request's server span.
    for (const t of [PASSTHROUGH_TRACE, ...PARALLEL_TRACES]) {
      const server = spans.find((s) => s.traceId === t && s.kind === SERVER && s.parentSpanId === CALLER)!;
      expect(proc.lines.find((l) => l.traceId === t && l.responseTime !== undefined)).toMatchObject({ traceId: t, spanId: server.spanId });
    }
  });
});

describe('tracing off', () => {
  test("no endpoint, or OTEL_SDK_DISABLED: nothing is exported, and access lines still carry the caller's trace id", async () => {
    receiver.spans.length = 0;
    for (const env of [{}, { OTEL_SDK_DISABLED: 'true', OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url }] as Record<string, string>[]) {
      const { proc, url } = await boot(env);
      try {
        const trace = 'abcdef0123456789abcdef0123456789';
        expect((await call(url, 'GET', '/v0.2/models', { traceparent: traceparent(trace, '0123456789abcdef') })).status).toBe(200);
        expect((await call(url, 'GET', '/v1beta/models', { traceparent: traceparent(trace, '0123456789abcdef') })).status).toBe(200);
        await deadline(
          until(() => proc.lines.filter((l) => l.responseTime !== undefined).length >= 2),
          10_000,
          'access lines',
        );
        const lines = proc.lines.filter((l) => l.responseTime !== undefined);
        expect(lines.map((l) => [(l.req as { url: string }).url, l.traceId])).toEqual([
          ['/v0.2/models', trace],
          ['/v1beta/models', trace],
        ]);
        expect(proc.lines.find((l) => String(l.msg).startsWith('gateway listening'))).toMatchObject({ tracing: null });
      } finally {
        await stop(proc);
      }
    }
    expect(receiver.requests).toMatchObject({ protobuf: 0 });
    expect(receiver.spans).toEqual([]);
  }, 60_000);

  test('an unsupported protocol or sampler stops the boot with the variable named (exit 2)', async () => {
    for (const [env, message] of [
      [
        { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' },
        /OTEL_EXPORTER_OTLP_PROTOCOL=grpc is not supported/,
      ],
      [{ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_TRACES_SAMPLER: 'sometimes' }, /OTEL_TRACES_SAMPLER=sometimes is not supported/],
    ] as const) {
      const proc = runMain(bundle(), ['serve', '--config', configFile], { ...BASE_ENV, ...env });
      expect(await deadline(proc.exited, 15_000, 'exit')).toEqual({ code: 2, signal: null });
      expect(proc.stderr()).toMatch(message);
    }
  });
});

/**
 * Traces of a fleet (real processes, Redis), exported over OTLP/HTTP `http/protobuf` (the default
 * protocol) to a real receiver that decodes the protobuf: a stream created on A, its drain
 * handover to B (`legacy.handover` on A, `legacy.adopt` on B), and the ticks of both owners, every
 * one linked to the create's span through the record, each with its replica's id; Redis commands
 * inside the store spans; no key anywhere.
 */
import { keyHash } from '../../../src/lib/keys';
import { startFleet } from '../../helpers/fleet';
import { openResults } from '../../helpers/results-socket';
import type { Fleet } from '../../helpers/fleet';
import { useMainBundle } from '../../helpers/main-bundle';
import { attributeStrings, startOtlpReceiver } from '../../helpers/otlp-receiver';
import type { OtlpReceiver, ReceivedSpan } from '../../helpers/otlp-receiver';
import { KEY, frameBody } from '../../helpers/stack';
import { deadline, until } from '../../helpers/time';
import { resultsAfter } from './fleet-test';

const bundle = useMainBundle();
let receiver: OtlpReceiver;
let fleet: Fleet | undefined;

beforeAll(async () => {
  receiver = await startOtlpReceiver();
  fleet = await startFleet({
    main: bundle().file,
    ids: ['A', 'B'],
    logLevel: 'info',
    env: { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_BSP_SCHEDULE_DELAY: '100', OTEL_SERVICE_NAME: 'gateway-under-test' },
  });
}, 120_000);
afterAll(async () => {
  await fleet?.stop();
  await receiver.close();
}, 60_000);

const CREATE_TRACE = '0af7651916cd43dd8448eb211c80319c';
const CALLER = 'b7ad6b7169203331';

const of = (replica: string) => (s: ReceivedSpan) => s.attributes['gateway.replica_id'] === replica;

test('a drain handover: the ticks of both owners link to the create; handover on A, adoption on B, each span with its replica', async () => {
  const [a, b] = [fleet!.replica('A'), fleet!.replica('B')];
  const created = await fetch(`${a.url}/v0.2/streams`, {
    method: 'POST',
    headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json', traceparent: `00-${CREATE_TRACE}-${CALLER}-01` },
    body: JSON.stringify(frameBody({ interval_seconds: 0.5 })),
  });
  expect(created.status).toBe(201);
  const id = ((await created.json()) as { stream_id: string }).stream_id;
  // The socket on B: A holds no connection, so its drain ends as soon as the stream is handed over.
  const socket = await openResults(b.url, id, KEY, { waitMs: null });
  await deadline(socket.waitFor(2), 30_000, 'results while A owns the stream');
  const termAt = Date.now();
  a.kill('SIGTERM');
  expect((await deadline(a.proc.exited, 30_000, 'A drains and exits')).code).toBe(0);
  await deadline(resultsAfter(socket, termAt, 2), 30_000, 'results once B owns the stream');
  socket.close();
  expect((await fetch(`${b.url}/v0.2/streams/${id}`, { method: 'DELETE', headers: { authorization: `Bearer ${KEY}` } })).status).toBe(200);

  const stream = (s: ReceivedSpan) => s.attributes['legacy.stream_id'] === id;
  await deadline(
    until(
      () =>
        receiver.spans.some((s) => s.name === 'legacy.end' && stream(s)) &&
        receiver.spans.some((s) => s.name === 'legacy.handover' && stream(s)),
    ),
    20_000,
    'the handover and the end exported',
  );
  const spans = receiver.spans;
  expect(receiver.requests.json).toBe(0);
  expect(spans.every((s) => s.protocol === 'protobuf')).toBe(true);

  const create = spans.find((s) => s.name === 'legacy.create' && stream(s))!;
  expect(create).toMatchObject({
    traceId: CREATE_TRACE,
    attributes: expect.objectContaining({ 'gateway.replica_id': 'A', 'gateway.key_hash': keyHash(KEY) }),
  });
  expect(create.resource).toMatchObject({ 'service.name': 'gateway-under-test', 'service.instance.id': 'A' });
  const toCreate = [expect.objectContaining({ traceId: CREATE_TRACE, spanId: create.spanId })];

  const handover = spans.find((s) => s.name === 'legacy.handover' && stream(s))!;
  expect(handover).toMatchObject({
    parentSpanId: '',
    links: toCreate,
    attributes: expect.objectContaining({ 'gateway.replica_id': 'A', 'legacy.handover.to': 'B', 'legacy.handover.claimed': true }),
  });
  const adopt = spans.find((s) => s.name === 'legacy.adopt' && stream(s))!;
  expect(adopt).toMatchObject({
    parentSpanId: '',
    links: toCreate,
    attributes: expect.objectContaining({ 'gateway.replica_id': 'B', 'legacy.adopt.how': 'handover', 'legacy.epoch': 2 }),
  });
  expect(adopt.resource).toMatchObject({ 'service.instance.id': 'B' });

  const ticks = spans.filter((s) => s.name === 'legacy.tick' && stream(s) && s.attributes['legacy.tick.outcome'] === 'ok');
  expect(ticks.filter(of('A')).length).toBeGreaterThanOrEqual(2);
  expect(ticks.filter(of('B')).length).toBeGreaterThanOrEqual(2);
  for (const t of ticks) {
    expect(t.links).toEqual(toCreate);
    expect(t.attributes['legacy.epoch']).toBe(t.attributes['gateway.replica_id'] === 'A' ? 1 : 2);
  }
  // B resumes A's grid: its first tick comes after A's last.
  const last = (r: string) => Math.max(...ticks.filter(of(r)).map((t) => Number(t.attributes['legacy.tick'])));
  const first = (r: string) => Math.min(...ticks.filter(of(r)).map((t) => Number(t.attributes['legacy.tick'])));
  expect(first('B')).toBeGreaterThan(last('A'));

  // The commit is a Lua script on Redis: the store span holds the ioredis command (its name only).
  const bTick = ticks.filter(of('B'))[0]!;
  const commit = spans.find((s) => s.name === 'store.commitTick' && s.parentSpanId === bTick.spanId)!;
  const redis = spans.filter((s) => s.traceId === commit.traceId && s.parentSpanId === commit.spanId);
  expect(redis.length).toBeGreaterThan(0);
  for (const r of redis) expect(r.attributes['db.statement'] ?? r.name).toMatch(/^(evalsha|eval)$/i);

  // Results reach B's socket through Redis: B's fan-out spans, linked to the create.
  const fanouts = spans.filter((s) => s.name === 'legacy.results.fanout' && stream(s));
  expect(fanouts.length).toBeGreaterThanOrEqual(4);
  for (const f of fanouts)
    expect(f).toMatchObject({
      links: toCreate,
      attributes: expect.objectContaining({ 'gateway.replica_id': 'B', 'legacy.results.sockets': 1 }),
    });

  const end = spans.find((s) => s.name === 'legacy.end' && stream(s))!;
  expect(end.attributes).toMatchObject({ 'gateway.replica_id': 'B', 'legacy.end_reason': 'client_requested' });
  expect(end.links).toEqual(toCreate);

  for (const s of spans) {
    expect(['A', 'B']).toContain(s.attributes['gateway.replica_id']);
    for (const v of attributeStrings(s)) expect([s.name, v.includes(KEY)]).toEqual([s.name, false]);
  }
}, 150_000);

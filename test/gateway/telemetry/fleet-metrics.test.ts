/**
 * Fleet and store metrics: the observer ports streams call (replicas seen, owned streams,
 * adoptions, fenced ticks) and the measured store (every call timed, failures counted, by
 * operation), read back as Prometheus text: from a registry, and from a gateway's /metrics on a
 * real redis-server.
 */
import { fanOut } from '../../../src/gateway/telemetry/observer';
import { memoryStore } from '../../../src/gateway/store/memory';
import { measuredStore } from '../../../src/gateway/store/measured';
import { connectRedisStore } from '../../../src/gateway/store/redis';
import { GatewayMetrics } from '../../../src/gateway/telemetry/metrics';
import { telemetryObserver } from '../../../src/gateway/telemetry/observer';
import { DeprecationUsage } from '../../../src/gateway/telemetry/usage';
import { keyHash } from '../../../src/lib/keys';
import { createLogger } from '../../../src/lib/logger';
import { startRedis } from '../../helpers/redis';
import { KEY, frameBody, http, startStack } from '../../helpers/stack';

const metricsFor = () => new GatewayMetrics({ activeStreams: () => 0, socketConnections: () => 0 }, { defaultMetrics: false });

/** The value of one sample line (`name{labels} value`), undefined when absent. */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

test('the fleet ports feed gateway_fleet_*: replicas and owned streams as gauges, adoptions by how, fenced ticks by reason (all at 0 before)', async () => {
  const metrics = metricsFor();
  const before = await metrics.text();
  for (const reason of ['fenced', 'duplicate', 'ended', 'missing'])
    expect(sample(before, `gateway_fleet_fenced_ticks_total{reason="${reason}"}`)).toBe(0);
  expect(sample(before, 'gateway_fleet_adoptions_total{how="failover"}')).toBe(0);

  const store = memoryStore();
  // As app.ts composes it: the telemetry observer behind the fan-out streams call.
  const observer = fanOut([telemetryObserver(metrics, new DeprecationUsage(store, createLogger('silent')))]);
  observer.fleetReplicas!(3);
  observer.fleetReplicas!(2);
  observer.ownedStreamCount!(7);
  observer.streamAdopted!('stream-a', 'failover');
  observer.streamAdopted!('stream-b', 'failover');
  observer.streamAdopted!('stream-c', 'handover');
  observer.tickFenced!('fenced');
  observer.tickFenced!('duplicate');
  observer.tickFenced!('duplicate');
  const text = await metrics.text();
  expect(sample(text, 'gateway_fleet_replicas')).toBe(2);
  expect(sample(text, 'gateway_fleet_owned_sessions')).toBe(7);
  expect(sample(text, 'gateway_fleet_adoptions_total{how="failover"}')).toBe(2);
  expect(sample(text, 'gateway_fleet_adoptions_total{how="handover"}')).toBe(1);
  expect(sample(text, 'gateway_fleet_fenced_ticks_total{reason="fenced"}')).toBe(1);
  expect(sample(text, 'gateway_fleet_fenced_ticks_total{reason="duplicate"}')).toBe(2);
  expect(sample(text, 'gateway_fleet_fenced_ticks_total{reason="ended"}')).toBe(0);
  // Stream ids are not labels.
  expect(text).not.toMatch(/stream-[abc]/);
  await store.close();
});

test('a measured store times every call and counts failures by operation, never by argument; a synchronous hook passes through', async () => {
  const metrics = metricsFor();
  const inner = memoryStore();
  const store = measuredStore(inner, metrics.store);
  expect(await store.acquireSlot('secret-key-hash', 'slot-1', 5)).toBe(true);
  expect(await store.acquireSlot('secret-key-hash', 'slot-2', 5)).toBe(true);
  await store.hbatch([{ key: 'depr:key:secret-key-hash', incr: { req: 1 } }]);
  const realGetRecord = inner.getRecord;
  inner.getRecord = () => Promise.reject(new Error('store down'));
  await expect(store.getRecord('s')).rejects.toThrow('store down');
  // A method answering synchronously (not a promise) is no command: passed through untimed.
  (inner as any).observe = () => 'unsubscribe';
  expect((store as any).observe()).toBe('unsubscribe');
  // What is not a call passes through; the real one answers again once restored.
  inner.getRecord = realGetRecord;
  expect(await store.getRecord('absent')).toBeUndefined();

  const text = await metrics.text();
  expect(sample(text, 'gateway_store_command_seconds_count{op="acquireSlot"}')).toBe(2);
  expect(sample(text, 'gateway_store_command_seconds_count{op="hbatch"}')).toBe(1);
  expect(sample(text, 'gateway_store_command_seconds_count{op="getRecord"}')).toBe(2);
  expect(sample(text, 'gateway_store_errors_total{op="getRecord"}')).toBe(1);
  expect(text).not.toMatch(/op="observe"/);
  expect(sample(text, 'gateway_store_errors_total{op="acquireSlot"}')).toBe(0); // present from the first call, so alerts see 0
  expect(text).not.toMatch(/secret-key-hash|slot-1/);
  await inner.close();
});

test("a gateway on Redis: /metrics shows its store's round trips by operation, and the failures once Redis is gone; no key", async () => {
  const redis = await startRedis();
  const store = await connectRedisStore(redis.url, { commandTimeoutMs: 500 });
  const stack = await startStack({}, { store });
  let redisUp = true;
  try {
    const created = await http(stack.url, 'POST', '/v0.2/streams', { body: frameBody({ interval_seconds: 5 }) });
    expect(created.status).toBe(201);
    const id = (created.body as { stream_id: string }).stream_id;
    expect((await http(stack.url, 'DELETE', `/v0.2/streams/${id}`)).status).toBe(200);
    const text = (await http(stack.url, 'GET', '/metrics')).body as string;
    expect(sample(text, 'gateway_store_command_seconds_count{op="acquireSlot"}')).toBe(1);
    expect(sample(text, 'gateway_store_command_seconds_count{op="putRecord"}')).toBeGreaterThanOrEqual(1);
    expect(sample(text, 'gateway_store_errors_total{op="acquireSlot"}')).toBe(0); // present from the first call, so alerts see 0
    expect(text).not.toContain(keyHash(KEY));
    expect(text).not.toContain(KEY);

    await redis.stop();
    redisUp = false;
    await expect(stack.gateway.gateway.store.getRecord(id)).rejects.toThrow();
    const after = (await http(stack.url, 'GET', '/metrics')).body as string;
    expect(sample(after, 'gateway_store_errors_total{op="getRecord"}')).toBe(1);
  } finally {
    await stack.close();
    await store.close();
    if (redisUp) await redis.stop();
  }
}, 30_000);

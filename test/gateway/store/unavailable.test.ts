/**
 * Redis away: a gateway on a Redis store whose redis-server is stopped refuses legacy calls that need
 * the store with 503 `store_unavailable` in the legacy body (retry-after), never a 500 or a hang, and
 * serves again once Redis is back on the same address.
 */
import { measuredStore } from '../../../src/gateway/store/measured';
import { connectRedisStore } from '../../../src/gateway/store/redis';
import type { Store } from '../../../src/gateway/store/store';
import { StoreUnavailableError } from '../../../src/gateway/store/store';
import { startRedis } from '../../helpers/redis';
import type { RedisServer } from '../../helpers/redis';
import { frameBody, http, startStack } from '../../helpers/stack';
import type { Stack } from '../../helpers/stack';
import { deadline, sleep } from '../../helpers/time';

const ADMIN = 'admin-token-for-the-outage-test';
let redis: RedisServer;
let store: Store;
let stack: Stack;
const calls: { op: string; failed: boolean }[] = [];

beforeAll(async () => {
  redis = await startRedis();
  // Shortish command timeout: ioredis keeps a refused command's timer until it fires; long enough
  // for a loaded CI machine to answer the calls made while Redis is up.
  store = await connectRedisStore(redis.url, { commandTimeoutMs: 1_000, connectTimeoutMs: 20_000 });
  // Every call the gateway makes, as its own measured store sees them (metrics, outage tracking).
  stack = await startStack(
    { admin: { token: ADMIN } },
    { store: measuredStore(store, { call: (op, _s, failed) => calls.push({ op, failed }) }) },
  );
}, 60_000);

afterAll(async () => {
  await stack?.close();
  await store?.close();
  await redis?.stop();
});

const created = (r: { status: number; body: unknown }) => (r.status === 201 ? (r.body as { stream_id: string }).stream_id : null);

test('Redis stopped: create and keepalive answer 503 store_unavailable in the legacy body, the admin report in {detail}; back once Redis is', async () => {
  const before = created(await http(stack.url, 'POST', '/v0.2/streams', { body: frameBody({ interval_seconds: 0.5 }) }));
  expect(before).toEqual(expect.any(String));
  expect(calls.some((c) => c.op === 'acquireSlot' && !c.failed)).toBe(true);

  await redis.stop();
  const create = await deadline(http(stack.url, 'POST', '/v0.2/streams', { body: frameBody() }), 10_000, 'create with Redis stopped');
  expect(create.status).toBe(503);
  expect(create.headers.get('retry-after')).toBe('1');
  expect(create.body).toEqual({
    error: 'store_unavailable',
    message: expect.stringMatching(/store/),
    request_id: expect.any(String),
    details: null,
  });
  const keepalive = await deadline(http(stack.url, 'POST', `/v0.2/streams/${before}/keepalive`), 10_000, 'keepalive with Redis stopped');
  expect(keepalive.status).toBe(503);
  expect((keepalive.body as { error: string }).error).toBe('store_unavailable');
  expect(calls.some((c) => c.failed)).toBe(true);
  // Outside /v0.2 the same code in the {detail} shape.
  const report = await deadline(http(stack.url, 'GET', '/admin/deprecation', { key: ADMIN }), 10_000, 'report with Redis stopped');
  expect(report.status).toBe(503);
  expect(report.body).toEqual({ detail: expect.stringMatching(/store/) });
  // The live stream keeps ticking; its results fail to go out through Redis: the process stays up.
  const tickFailed = () => calls.some((c) => (c.op === 'publish' || c.op === 'commitTick') && c.failed);
  await deadline(
    (async () => {
      while (!tickFailed()) await sleep(20);
    })(),
    10_000,
    'a tick failing to publish',
  );
  expect((await http(stack.url, 'GET', '/healthz', { key: null })).status).toBe(200);

  // Back on the same port, empty: creates work again (a restart's bookkeeping is the fleet's).
  const again = await startRedis([], redis.port);
  redis = again;
  let id: string | null = null;
  await deadline(
    (async () => {
      while (!(id = created(await http(stack.url, 'POST', '/v0.2/streams', { body: frameBody() })))) await sleep(50);
    })(),
    15_000,
    'a create after Redis came back',
  );
  expect((await http(stack.url, 'DELETE', `/v0.2/streams/${id}`)).status).toBe(200);
}, 60_000);

test('StoreUnavailableError names the operation and keeps the cause', async () => {
  const cause = new Error('Connection is closed.');
  const err = new StoreUnavailableError('commitTick', cause);
  expect(err).toMatchObject({ status: 503, code: 'store_unavailable', op: 'commitTick', cause });
  expect(err.toLegacyBody('req-1')).toEqual({ error: 'store_unavailable', message: err.message, request_id: 'req-1', details: null });
});

test('a record that does not parse is a bug, not an outage: the error stays what it is', async () => {
  const own = await startRedis();
  const s = await connectRedisStore(own.url, { prefix: 'bad:' });
  try {
    await own.command('HSET', 'bad:session:{broken}', 'state', 'not json');
    await expect(s.getRecord('broken')).rejects.toBeInstanceOf(SyntaxError);
    expect(await s.ready()).toBe(true);
  } finally {
    await s.close();
    await own.stop();
  }
});

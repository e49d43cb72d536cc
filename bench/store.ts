/**
 * The store's operations against a local redis-server (started here on a free loopback port) and
 * the memory store: latency p50/p99 at one in flight, and Redis commands per operation (the
 * server's `total_commands_processed`: a script counts its EVALSHA plus each call inside it; every
 * operation here is one round trip).
 */
import { memoryStore } from '../src/gateway/store/memory';
import { connectRedisStore } from '../src/gateway/store/redis';
import { buildStreamRecord } from '../src/gateway/legacy/streams/stream-record';
import type { StreamRecord, Store } from '../src/gateway/store/store';
import { startRedis, startRedisCluster } from '../test/helpers/redis';
import type { RedisServer } from '../test/helpers/redis';
import { quantile } from '../test/helpers/util';
import { hincr } from '../test/helpers/store-ops';

const N = 2_000;

const record = (streamId: string): StreamRecord =>
  buildStreamRecord<unknown>({
    streamId,
    keyHash: 'bench-key',
    slotId: streamId,
    accountId: 'bench-acct',
    nowMs: Date.now(),
    leaseExpiresAtMs: Date.now() + 60_000,
    prompt: 'Describe the frame',
    spec: { mode: 'frame', processing: { interval_seconds: 1 }, inference: { model: 'local/analyzer', max_tokens: 200 } },
    owner: null,
  });

async function commandsProcessed(redis: RedisServer): Promise<number> {
  const info = await redis.command('INFO', 'stats');
  return Number(/total_commands_processed:(\d+)/.exec(info)?.[1] ?? NaN);
}

/** Latency of `op` (ms) at one in flight, and how many Redis commands each call cost. */
async function measure(
  store: Store,
  redis: RedisServer | undefined,
  op: (i: number) => Promise<unknown>,
): Promise<{ p50: number; p99: number; cmds: number }> {
  for (let i = 0; i < 100; i++) await op(N + i); // warm-up (scripts loaded, JIT)
  const before = redis ? await commandsProcessed(redis) : 0;
  const samples: number[] = [];
  for (let i = 0; i < N; i++) {
    const t = process.hrtime.bigint();
    await op(i);
    samples.push(Number(process.hrtime.bigint() - t) / 1e6);
  }
  // The INFO call itself counts once.
  const cmds = redis ? ((await commandsProcessed(redis)) - before - 1) / N : 0;
  return { p50: quantile(samples, 0.5), p99: quantile(samples, 0.99), cmds };
}

async function benchOne(name: string, store: Store, redis?: RedisServer): Promise<void> {
  await store.putRecord({ ...record('bench-owned'), owner: 'bench-gw', epoch: 1 });
  let ticks = 0;
  const ops: [string, (i: number) => Promise<unknown>][] = [
    ['acquireSlot', (i) => store.acquireSlot('bench-key', `s${i}`, 1_000_000)],
    ['releaseSlot', (i) => store.releaseSlot('bench-key', `s${i}`)],
    ['putRecord', (i) => store.putRecord(record(`st${i}`))],
    ['getRecord', (i) => store.getRecord(`st${i}`)],
    ['updateRecord', (i) => store.updateRecord(`st${i}`, { leaseExpiresAtMs: Date.now() + 60_000 })],
    [
      'addFeedback',
      (i) =>
        store.addFeedback(
          {
            id: `f${i}`,
            stream_id: `st${i % 100}`,
            accountId: 'bench-acct',
            rating: 4,
            category: 'accuracy',
            feedback: 'ok',
            created_at: '',
            updated_at: '',
          },
          { perStream: 1e9, perAccount: 1e9 },
        ),
    ],
    ['feedbackOf (page of 50)', (i) => store.feedbackOf('bench-acct', { limit: 50, after: String(i) })],
    ['hincr (one-field hbatch)', (i) => hincr(store, 'bench:h', `f${i % 50}`)],
    // The fleet's per-tick path (one EVALSHA round trip) and its per-second/keepalive companions.
    [
      'commitTick',
      (i) =>
        store.commitTick('bench-owned', {
          owner: 'bench-gw',
          epoch: 1,
          tick: ticks++,
          costMicrocents: i,
          channel: 'bench-results',
          message: 'r{"ok":true}',
        }),
    ],
    ['renewLease', (i) => store.renewLease('bench-owned', Date.now() + 60_000, i)],
    ['heartbeat', () => store.heartbeat('bench-gw')],
    ['membership', () => store.membership(3_000)],
  ];
  for (const [label, op] of ops) {
    const r = await measure(store, redis, op);
    console.log(
      `${name} ${label.padEnd(24)} p50 ${r.p50.toFixed(3)} ms  p99 ${r.p99.toFixed(3)} ms${redis ? `  ${r.cmds.toFixed(2)} Redis commands/op` : ''}`,
    );
  }
  // Publish → delivery to a subscriber of the same store (the results fan-out path).
  let resolve: () => void = () => {};
  const unsub = await store.subscribe('bench-ch', () => resolve());
  const r = await measure(store, redis, async () => {
    const got = new Promise<void>((r) => (resolve = r));
    await store.publish('bench-ch', 'r{"ok":true}', 'bench-ch');
    await got;
  });
  unsub();
  console.log(
    `${name} ${'publish → delivered'.padEnd(24)} p50 ${r.p50.toFixed(3)} ms  p99 ${r.p99.toFixed(3)} ms${redis ? `  ${r.cmds.toFixed(2)} Redis commands/op` : ''}`,
  );
  // 60 concurrent acquires of one key (the exact-limit path under contention).
  const rounds: number[] = [];
  for (let round = 0; round < 50; round++) {
    const t = process.hrtime.bigint();
    const got = await Promise.all(Array.from({ length: 60 }, (_, i) => store.acquireSlot('bench-60', `r${round}-${i}`, 5)));
    rounds.push(Number(process.hrtime.bigint() - t) / 1e6);
    await Promise.all(got.map((ok, i) => (ok ? store.releaseSlot('bench-60', `r${round}-${i}`) : undefined)));
  }
  console.log(
    `${name} ${'60 concurrent acquires'.padEnd(24)} p50 ${quantile(rounds, 0.5).toFixed(3)} ms  p99 ${quantile(rounds, 0.99).toFixed(3)} ms per round of 60`,
  );
}

export async function benchStore(): Promise<void> {
  const memory = memoryStore();
  await benchOne('memory', memory);
  await memory.close();
  const redis = await startRedis();
  const store = await connectRedisStore(redis.url);
  try {
    await benchOne('redis ', store, redis);
  } finally {
    await store.close();
    await redis.stop();
  }
  // The same on a local 3-primary Cluster (latency only: commands are counted per server).
  const cluster = await startRedisCluster(3);
  const onCluster = await connectRedisStore(cluster.url);
  try {
    await benchOne('cluster', onCluster);
  } finally {
    await onCluster.close();
    await cluster.stop();
  }
}

/**
 * Store cost of the deprecation telemetry per stream-second, before and after per-replica
 * buffering, on the memory store and on a local redis-server: STREAMS legacy streams at 1 Hz over
 * KEYS keys (5 streams per key, the limit), each tick an inference event, each stream a keepalive
 * request every 10 s. Time is virtual (a flush at each second's end, as the 1 s timer does), so
 * the figures are counts, not timings of this machine.
 *
 * "before" replays the per-event writes of the unbuffered usage.ts (one hincr/hsetMin/hsetMax per
 * field, as of commit 94cb8b6); "after" is DeprecationUsage itself (one store.hbatch per second).
 * Redis commands: `total_commands_processed` (a script counts its EVALSHA and each call inside it)
 * and the commands the client sent (one per store call before; one EVALSHA per hash after).
 */
import { MemoryStore } from '../gateway/store/memory';
import { measuredStore } from '../gateway/store/measured';
import { RedisStore } from '../gateway/store/redis';
import type { Store } from '../gateway/store/store';
import { DeprecationUsage, utcDay } from '../gateway/telemetry/usage';
import { createLogger } from '../lib/logger';
import { startRedis } from './redis-server';
import type { RedisServer } from './redis-server';
import { hincr, hsetMax, hsetMin } from './store-ops';

const STREAMS = Number(process.env.BENCH_TELEMETRY_STREAMS ?? 1_000);
const KEYS = Math.ceil(STREAMS / 5);
const SECONDS = 20;
const T0 = Date.parse('2026-03-01T12:00:00Z');

interface Sink {
  record(kind: 'inference' | 'request', keyHash: string, t: number): void;
  /** End of a virtual second: what is written by then. */
  settle(): Promise<void>;
}

/** The writes of the unbuffered usage.ts, one store call per field, per event. */
function unbuffered(store: Store): Sink {
  const inFlight: Promise<void>[] = [];
  return {
    record(kind, kh, t) {
      const k = `depr:key:${kh}`;
      const d = `depr:day:${utcDay(t)}`;
      if (kind === 'inference') {
        inFlight.push(hincr(store, k, 'inferences:ok'), hincr(store, d, 'inferences'), hincr(store, k, 'output_tokens', 20), hincr(store, d, 'output_tokens', 20));
      } else {
        inFlight.push(
          hsetMin(store, k, 'first_seen_ms', t),
          hsetMax(store, k, 'last_seen_ms', t),
          hincr(store, k, 'req:POST /v0.2/streams/:id/keepalive'),
          hincr(store, k, `day:${utcDay(t)}`),
          hincr(store, d, 'requests'),
          hincr(store, d, `key:${kh}`),
          hsetMax(store, `depr:acct:${kh}`, 'acct', t),
        );
      }
    },
    async settle() {
      await Promise.all(inFlight.splice(0));
    },
  };
}

function buffered(store: Store, now: () => number): Sink {
  const usage = new DeprecationUsage(store, createLogger('silent'), now);
  return {
    record(kind, kh) {
      if (kind === 'inference') usage.inference(kh, true, 20);
      else usage.request(kh, 'POST /v0.2/streams/:id/keepalive', 'acct');
    },
    settle: () => usage.flush(),
  };
}

async function commandsProcessed(redis: RedisServer): Promise<number> {
  return Number(/total_commands_processed:(\d+)/.exec(await redis.command('INFO', 'stats'))?.[1] ?? NaN);
}

const VARIANTS = [
  ['before (per event)', unbuffered],
  ['after (buffered 1 s)', buffered],
] as const;

async function run(label: string, raw: Store, redis: RedisServer | undefined, make: (s: Store, now: () => number) => Sink): Promise<void> {
  let calls = 0;
  let sent = 0;
  // Commands the client sends: one per store call, except hbatch (one EVALSHA per hash).
  const hbatch = raw.hbatch.bind(raw);
  raw.hbatch = (u) => {
    sent += u.length - 1;
    return hbatch(u);
  };
  const store = measuredStore(raw, { call: () => void calls++ });
  let t = T0;
  const sink = make(store, () => t);
  // One keepalive per stream before counting: day pruning (a once-per-key-and-day read) is not per tick.
  for (let s = 0; s < STREAMS; s++) sink.record('request', `kh${s % KEYS}`, t);
  await sink.settle();
  [calls, sent] = [0, 0];
  const before = redis ? await commandsProcessed(redis) : 0;
  const cpu = process.cpuUsage();
  for (let sec = 0; sec < SECONDS; sec++) {
    for (let s = 0; s < STREAMS; s++) {
      t = T0 + (sec + 1) * 1_000 + Math.floor((s * 1_000) / STREAMS);
      sink.record('inference', `kh${s % KEYS}`, t);
      if ((s + sec) % 10 === 0) sink.record('request', `kh${s % KEYS}`, t);
    }
    await sink.settle();
  }
  const used = process.cpuUsage(cpu);
  const per = (n: number) => (n / (STREAMS * SECONDS)).toFixed(3);
  // The INFO call itself counts once.
  const processed = redis ? (await commandsProcessed(redis)) - before - 1 : 0;
  console.log(
    `${label.padEnd(28)} store calls ${per(calls)}/stream-s` +
      (redis ? `  Redis commands sent ${per(calls + sent)}, processed ${per(processed)}/stream-s` : '') +
      `  CPU ${((used.user + used.system) / (STREAMS * SECONDS)).toFixed(1)} µs/stream-s`,
  );
}

export async function benchTelemetry(): Promise<void> {
  console.log(`${STREAMS} streams at 1 Hz over ${KEYS} keys, ${SECONDS} virtual s, a keepalive per stream every 10 s`);
  for (const [label, make] of VARIANTS) {
    const memory = new MemoryStore();
    await run(`${label} memory`, memory, undefined, make);
    await memory.close();
  }
  const redis = await startRedis();
  try {
    for (const [i, [label, make]] of VARIANTS.entries()) {
      const store = await RedisStore.connect(redis.url, { prefix: `bench-telemetry-${i}:` });
      try {
        await run(`${label} redis`, store, redis, make);
      } finally {
        await store.close();
      }
    }
  } finally {
    await redis.stop();
  }
}

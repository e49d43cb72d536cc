/**
 * Store cost of the deprecation telemetry per stream-second, written per event and buffered per
 * replica, on the memory store and on a local redis-server: STREAMS legacy streams at 1 Hz over
 * KEYS keys (5 streams per key, the limit), each tick an inference event, each stream a keepalive
 * request every 10 s. Time is virtual (a flush at each second's end, as the 1 s timer does), so
 * the figures are counts, not timings of this machine.
 *
 * "per event" writes each field as it happens (one hincr/hsetMin/hsetMax per field, each a
 * one-field store.hbatch: on Redis an EVALSHA plus the call inside it; the baseline that shows what
 * buffering saves); "buffered" is DeprecationUsage itself (one store.hbatch per hash per second). Redis commands: `total_commands_processed` (a script counts its EVALSHA and each call
 * inside it) and the commands the client sent (one per store call per event; one EVALSHA per hash
 * buffered).
 */
import { memoryStore } from '../src/gateway/store/memory';
import { measuredStore } from '../src/gateway/store/measured';
import { connectRedisStore } from '../src/gateway/store/redis';
import type { Store } from '../src/gateway/store/store';
import { DeprecationUsage, utcDay } from '../src/gateway/telemetry/usage';
import { createLogger } from '../src/lib/logger';
import { realClock } from '../src/lib/timers';
import { startRedis } from '../test/helpers/redis';
import type { RedisServer } from '../test/helpers/redis';
import { hincr, hsetMax, hsetMin } from '../test/helpers/store-ops';

const STREAMS = Number(process.env.BENCH_TELEMETRY_STREAMS ?? 1_000);
const KEYS = Math.ceil(STREAMS / 5);
const SECONDS = 20;
const T0 = Date.parse('2026-03-01T12:00:00Z');

interface Sink {
  record(kind: 'inference' | 'request', keyHash: string, t: number): void;
  /** End of a virtual second: what is written by then. */
  settle(): Promise<void>;
}

/** Unbuffered writes: one store call per field, per event (the baseline). */
function unbuffered(store: Store): Sink {
  const inFlight: Promise<void>[] = [];
  return {
    record(kind, kh, t) {
      const k = `depr:key:${kh}`;
      const d = `depr:day:${utcDay(t)}`;
      if (kind === 'inference') {
        inFlight.push(
          hincr(store, k, 'inferences:ok'),
          hincr(store, d, 'inferences'),
          hincr(store, k, 'output_tokens', 20),
          hincr(store, d, 'output_tokens', 20),
        );
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
  // The bench's own time for the counters; the flush timer stays real (it never fires: settle flushes).
  const usage = new DeprecationUsage(store, createLogger('silent'), { ...realClock, now });
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
  ['per event', unbuffered],
  ['buffered 1 s', buffered],
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
    const memory = memoryStore();
    await run(`${label} memory`, memory, undefined, make);
    await memory.close();
  }
  const redis = await startRedis();
  try {
    for (const [i, [label, make]] of VARIANTS.entries()) {
      const store = await connectRedisStore(redis.url, { prefix: `bench-telemetry-${i}:` });
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

/**
 * One hostile tenant, ordinary keys, the documented API (oversized strings and schemas, costly
 * patterns, feedback floods, the create-body fuzz), against a gateway and emulator in this process. For each case: event-loop lag p99
 * (monitorEventLoopDelay) and /healthz latency p99 from a probe every 20 ms (target ≤ 20 ms);
 * heap after 300 × max-size feedback; re2js against backtracking RegExp; fuzz status counts.
 * The hostile client runs in this process too, so its own work (building 200 KB bodies) counts
 * against the figures: they are an upper bound.
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';
import fc from 'fast-check';
import type { Config } from '../src/config';
import { createLogger } from '../src/lib/logger';
import { JsonSchemaValidators, linearRegExp } from '../src/lib/json-schema';
import { startEmulator } from '../src/emulator/server';
import { startGateway } from '../src/gateway/server';
import { LEGACY_LIMITS } from '../src/gateway/legacy/contract/schema';
import { bodyText, createBodies, FUZZ_SEED } from '../test/helpers/create-fuzz';
import { quantile } from '../test/helpers/util';

const mib = (b: number) => `${(b / 1024 / 1024).toFixed(1)} MiB`;
const ms = (x: number) => `${x.toFixed(1)} ms`;

export async function benchHostile(base: Config): Promise<void> {
  const seconds = Number(process.env.BENCH_SECONDS ?? 3);
  const cfg: Config = {
    ...base,
    port: 0,
    host: '127.0.0.1',
    logLevel: 'warn',
    emulator: {
      ...base.emulator,
      port: 0,
      controlApi: true,
      autoPublish: { ...base.emulator.autoPublish, enabled: true, fps: 5, width: 160, height: 120 },
    },
    legacy: { ...base.legacy, firstFramePollMs: 50, tombstoneSeconds: 1 },
  };
  const logger = createLogger('error');
  const emulator = await startEmulator(cfg, logger);
  const gw = await startGateway(cfg, logger, emulator.url);
  const key = `${cfg.brand}-local-dev`;
  const broke = `${cfg.brand}-local-broke`;
  const call = async (method: string, path: string, body?: string, k = key) => {
    const res = await fetch(`${gw.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${k}`, 'content-type': 'application/json' },
      body,
    });
    const text = await res.text();
    return { status: res.status, text };
  };
  const clip = (processing: Record<string, unknown>, inference: Record<string, unknown> = {}) =>
    JSON.stringify({
      mode: 'clip',
      processing: { target_fps: 1, clip_length_seconds: 1, delay_seconds: 0.5, ...processing },
      inference: { prompt: 'What happens?', model: 'local/analyzer-mini', ...inference },
    });

  /** Runs `attack` in a loop for `seconds` (or `count` times) while probing /healthz; prints lag and probe p99. */
  async function phase(name: string, attack: () => Promise<string | void>, count?: number): Promise<void> {
    const lag = monitorEventLoopDelay({ resolution: 1 });
    const probes: number[] = [];
    const statuses = new Map<string, number>();
    let running = true;
    const probe = (async () => {
      while (running) {
        const t = performance.now();
        await fetch(`${gw.url}/healthz`).then((r) => r.arrayBuffer());
        probes.push(performance.now() - t);
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    lag.enable();
    const until = Date.now() + seconds * 1000;
    let n = 0;
    while (count === undefined ? Date.now() < until : n < count) {
      const outcome = (await attack()) ?? 'done';
      statuses.set(outcome, (statuses.get(outcome) ?? 0) + 1);
      n++;
    }
    lag.disable();
    running = false;
    await probe;
    const counts = [...statuses].map(([k, v]) => `${k}×${v}`).join(' ');
    console.log(
      `${name.padEnd(44)} loop lag p99 ${ms(lag.percentile(99) / 1e6)}  /healthz p99 ${ms(quantile(probes, 0.99))}  (${n} attacks: ${counts})`,
    );
  }

  try {
    // Case 1: timer overflow. Refused delays, and the largest accepted one never ticks early.
    const longStream = await call('POST', '/v0.2/streams', clip({ delay_seconds: LEGACY_LIMITS.maxDelaySeconds }));
    const longId = (JSON.parse(longStream.text) as { stream_id: string }).stream_id;
    let i = 0;
    await phase('1 delay_seconds 2147484 / 1e308', async () => {
      const r = await call('POST', '/v0.2/streams', clip({ delay_seconds: i++ % 2 ? 2147484 : 1e308 }));
      return String(r.status);
    });
    await call('DELETE', `/v0.2/streams/${longId}`);

    // Case 2: the 193 KB / 3,000-property schema (zero-balance key and a funded one), then schemas
    // at the caps, each distinct (no cache hit), compiled after the slot and credit checks.
    const props = (n: number, salt: number) =>
      Object.fromEntries(Array.from({ length: n }, (_, j) => [`field_${j}`, { type: 'string', description: `p${j}-${salt}` }]));
    const huge = { type: 'object', properties: props(3000, 0) };
    i = 0;
    await phase('2a 3,000-property schema (both keys)', async () => {
      const r = await call('POST', '/v0.2/streams', clip({}, { output_schema_json: huge }), i++ % 2 ? broke : key);
      return String(r.status);
    });
    // 2b against 2c: the same create/delete cycle with and without a compile (the emulator's
    // stream setup runs in this process too).
    let salt = 0;
    const cycle = async (inference: Record<string, unknown>) => {
      const r = await call('POST', '/v0.2/streams', clip({}, inference));
      if (r.status === 201) await call('DELETE', `/v0.2/streams/${(JSON.parse(r.text) as { stream_id: string }).stream_id}`);
      return String(r.status);
    };
    await phase('2b distinct schemas at the node cap', () =>
      cycle({ output_schema_json: { type: 'object', properties: props(120, ++salt) } }),
    );
    await phase('2c the same creates without a schema', () => cycle({}));

    // Case 3: ReDoS. A stream validating every answer against ^(x+x+)+y$, and the gateway's
    // validator fed 40-x answers back to back (the answer a tenant steers through its prompt).
    const redos = { type: 'object', properties: { answer: { type: 'string', pattern: '^(x+x+)+y$' } } };
    const redosStream = await call('POST', '/v0.2/streams', clip({ delay_seconds: 0.5 }, { output_schema_json: redos }));
    const validate = gw.gateway.streams.schemas.get(redos)!;
    await phase('3 pattern ^(x+x+)+y$ on 40-char answers', async () => {
      for (let k = 0; k < 100; k++) validate({ answer: 'x'.repeat(40) });
      await new Promise((r) => setImmediate(r));
      return 'x100';
    });
    if (redosStream.status === 201)
      await call('DELETE', `/v0.2/streams/${(JSON.parse(redosStream.text) as { stream_id: string }).stream_id}`);
    benchRegexEngines();

    // Case 4: 300 × max-size feedback over five streams, then the list, then the tombstone.
    globalThis.gc?.();
    const heapBefore = process.memoryUsage().heapUsed;
    const ids: string[] = [];
    for (let s = 0; s < 5; s++)
      ids.push((JSON.parse((await call('POST', '/v0.2/streams', clip({ delay_seconds: 60 }))).text) as { stream_id: string }).stream_id);
    const fb = JSON.stringify({
      rating: 3,
      category: 'c'.repeat(LEGACY_LIMITS.maxCategoryChars),
      feedback: 'f'.repeat(LEGACY_LIMITS.maxFeedbackChars),
    });
    const oneMiB = JSON.stringify({ rating: 3, category: 'c', feedback: 'f'.repeat(1024 * 1024 - 64) });
    let sent = 0;
    await phase(
      '4 feedback: 300 × max-size, then 1 MiB bodies',
      async () => {
        const body = sent < 300 ? fb : oneMiB;
        const r = await call('POST', `/v0.2/streams/${ids[sent++ % ids.length]}/feedback`, body);
        return String(r.status);
      },
      310,
    );
    globalThis.gc?.();
    const heapAfter = process.memoryUsage().heapUsed;
    const list = await call('GET', '/v0.2/streams/feedback');
    const all = await call('GET', `/v0.2/streams/feedback?limit=${cfg.legacy.feedback.maxPageSize}`);
    for (const id of ids) await call('DELETE', `/v0.2/streams/${id}`);
    await new Promise((r) => setTimeout(r, (cfg.legacy.tombstoneSeconds + 0.5) * 1000));
    globalThis.gc?.();
    const heapPruned = process.memoryUsage().heapUsed;
    const left = (JSON.parse((await call('GET', '/v0.2/streams/feedback')).text) as unknown[]).length;
    console.log(
      `4 heap: before ${mib(heapBefore)}, after ${sent} feedback posts ${mib(heapAfter)}, after tombstone ${mib(heapPruned)} (${left} entries left); ` +
        `list: default page ${(list.text.length / 1024).toFixed(0)} KiB, largest page ${(all.text.length / 1024).toFixed(0)} KiB` +
        (globalThis.gc ? '' : ' (run with --expose-gc for settled heap figures)'),
    );

    // Fuzz: the create-body generator (same seed as the test), counted by status.
    const bodies = fc.sample(createBodies, { seed: FUZZ_SEED, numRuns: 500 });
    let next = 0;
    const fuzzStatuses = new Map<number, number>();
    await phase('fuzz: create bodies', async () => {
      const r = await call('POST', '/v0.2/streams', bodyText(bodies[next++ % bodies.length]));
      fuzzStatuses.set(r.status, (fuzzStatuses.get(r.status) ?? 0) + 1);
      if (r.status === 201) await call('DELETE', `/v0.2/streams/${(JSON.parse(r.text) as { stream_id: string }).stream_id}`);
      return r.status >= 500 ? '5xx' : r.status < 300 ? '2xx' : '4xx';
    });
    console.log(
      `fuzz statuses: ${[...fuzzStatuses]
        .sort()
        .map(([k, v]) => `${k}×${v}`)
        .join(' ')}`,
    );
  } finally {
    await gw.close();
    await emulator.close();
  }
}

/** Why re2js: backtracking RegExp doubles per character on ^(x+x+)+y$; re2js stays linear. */
function benchRegexEngines(): void {
  const time = (fn: () => void) => {
    const t = performance.now();
    fn();
    return performance.now() - t;
  };
  const native = /^(x+x+)+y$/;
  const re2 = linearRegExp('^(x+x+)+y$');
  const nativeTimes = [16, 20, 22].map((n) => `${n} chars ${ms(time(() => native.test('x'.repeat(n))))}`).join(', ');
  const re2Times = [28, 1000, 100_000].map((n) => `${n} chars ${ms(time(() => re2.test(`${'x'.repeat(n)}z`)))}`).join(', ');
  const simple = linearRegExp('^[a-z]+@[a-z]+\\.com$');
  const nativeSimple = /^[a-z]+@[a-z]+\.com$/;
  const sample = 'someone@example.com';
  const reps = 100_000;
  const perRe2 = time(() => {
    for (let k = 0; k < reps; k++) simple.test(sample);
  });
  const perNative = time(() => {
    for (let k = 0; k < reps; k++) nativeSimple.test(sample);
  });
  console.log(`3 RegExp (backtracking): ${nativeTimes}`);
  console.log(`3 re2js (linear):        ${re2Times}`);
  console.log(`3 ordinary pattern, ${reps} tests: RegExp ${ms(perNative)}, re2js ${ms(perRe2)}`);
  const v = new JsonSchemaValidators({ maxEntries: 100 });
  v.compile({ type: 'string' }); // the ajv instance itself
  const compiles = Array.from({ length: 20 }, (_, k) =>
    time(() =>
      v.compile({
        type: 'object',
        properties: Object.fromEntries(Array.from({ length: 120 }, (_, j) => [`f${j}-${k}`, { type: 'string' }])),
      }),
    ),
  );
  console.log(
    `2 compile at the node cap (120 properties), 20 distinct: p50 ${ms(quantile(compiles, 0.5))}, max ${ms(Math.max(...compiles))}`,
  );
}

/**
 * Upstream outage figures, in process against the embedded emulator:
 * - completion attempts per minute reaching the upstream during a full completion outage
 *   (every attempt's connection reset) for N streams at a 1 s cadence, with the circuit breaker
 *   and without it (then every tick costs 4 attempts × each fallback model);
 * - time until a 1 s-cadence client gets its first result (an `upstream_timeout` error) when
 *   completions stall, with the cadence-tied attempt timeout and tick deadline.
 * Bounded: fixed windows, everything closed at the end.
 */
import WebSocket from 'ws';
import { loadConfig } from '../src/config';
import type { Config } from '../src/config';
import { createLogger } from '../src/lib/logger';
import { startEmulator } from '../src/emulator/server';
import { startGateway } from '../src/gateway/server';

const KEY = 'svc-local-dev';
const MODEL = 'local/analyzer';

interface Setup {
  emulatorUrl: string;
  gatewayUrl: string;
  close(): Promise<void>;
}

async function setup(base: Config, overrides: Record<string, unknown>): Promise<Setup> {
  const cfg = loadConfig({
    env: {},
    overrides: {
      port: 0,
      host: '127.0.0.1',
      logLevel: 'silent',
      emulator: {
        port: 0,
        controlApi: true,
        accounts: base.emulator.accounts,
        models: base.emulator.models,
        autoPublish: { enabled: true, fps: 2, width: 160, height: 120 },
      },
      legacy: { firstFramePollMs: 50, maxStreamsPerKey: 1000, ...(overrides.legacy as object) },
      upstreamBreaker: overrides.upstreamBreaker,
    },
  });
  const logger = createLogger('silent');
  const emulator = await startEmulator(cfg, logger);
  const gateway = await startGateway(cfg, logger, emulator.url);
  return {
    emulatorUrl: emulator.url,
    gatewayUrl: gateway.url,
    async close() {
      await gateway.close();
      await emulator.close();
    },
  };
}

async function post(url: string, body: unknown, key?: string): Promise<{ status: number; body: unknown }> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: await res.json().catch(() => null) };
}

const FAULT_COUNT = 1_000_000;
async function faultAttempts(emulatorUrl: string): Promise<number> {
  const state = (await (await fetch(`${emulatorUrl}/_emulator/state`)).json()) as { faults: { count: number }[] };
  return FAULT_COUNT - (state.faults[0]?.count ?? FAULT_COUNT);
}

async function createStreams(gatewayUrl: string, n: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const r = await post(
      `${gatewayUrl}/v0.2/streams`,
      { mode: 'frame', processing: { interval_seconds: 1 }, inference: { prompt: 'p', model: MODEL } },
      KEY,
    );
    if (r.status !== 201) throw new Error(`create answered ${r.status}: ${JSON.stringify(r.body)}`);
    ids.push((r.body as { stream_id: string }).stream_id);
  }
  return ids;
}

/** Attempts per minute that reach the upstream while every completion connection is reset. */
async function outageAttempts(base: Config, streams: number, windowMs: number, breaker: boolean, fallbacks: string[]): Promise<number> {
  const s = await setup(base, { upstreamBreaker: { threshold: breaker ? 5 : 0, openMs: 5000 }, legacy: { fallbackModels: fallbacks } });
  try {
    await post(`${s.emulatorUrl}/_emulator/faults`, { model: '*', count: FAULT_COUNT, reset: true });
    await createStreams(s.gatewayUrl, streams);
    await new Promise((r) => setTimeout(r, windowMs));
    return ((await faultAttempts(s.emulatorUrl)) * 60_000) / windowMs;
  } finally {
    await s.close();
  }
}

/** Ms from the socket's auth until its first result when every completion stalls for 60 s. */
async function stallFirstResultMs(base: Config): Promise<{ ms: number; error: string }> {
  const s = await setup(base, {});
  try {
    await post(`${s.emulatorUrl}/_emulator/faults`, { model: '*', count: FAULT_COUNT, latencyMs: 60_000 });
    const [id] = await createStreams(s.gatewayUrl, 1);
    const ws = new WebSocket(`${s.gatewayUrl.replace(/^http/, 'ws')}/v0.2/ws/streams/${id}`);
    const t0 = performance.now();
    const first = await new Promise<string>((resolve, reject) => {
      const guard = setTimeout(() => reject(new Error('no result in 60 s')), 60_000);
      ws.on('open', () => ws.send(JSON.stringify({ api_key: KEY })));
      ws.once('message', (d) => {
        clearTimeout(guard);
        resolve(d.toString());
      });
    });
    ws.close();
    return { ms: performance.now() - t0, error: String((JSON.parse(first) as { error: unknown }).error) };
  } finally {
    await s.close();
  }
}

export async function benchUpstreamOutage(base: Config): Promise<void> {
  const streams = Number(process.env.BENCH_OUTAGE_STREAMS ?? 10);
  const windowMs = Number(process.env.BENCH_OUTAGE_WINDOW_MS ?? 20_000);
  const fallbacks = ['local/analyzer-mini'];
  console.log(`full completion outage, ${streams} streams at 1 s, fallback ${fallbacks.join(', ')}, ${windowMs / 1000} s window:`);
  for (const breaker of [false, true]) {
    const perMin = await outageAttempts(base, streams, windowMs, breaker, fallbacks);
    console.log(`  breaker ${breaker ? 'on (5 failures, 5 s open)' : 'off'}: ${Math.round(perMin)} upstream attempts/min`);
  }
  const stall = await stallFirstResultMs(base);
  console.log(`completions stalled 60 s, 1 s cadence: first result after ${(stall.ms / 1000).toFixed(1)} s: ${stall.error}`);
  console.log('  (before: 4 attempts × 30 s + 3.5 s of retry waits ≈ 124 s, more with fallbacks)');
}

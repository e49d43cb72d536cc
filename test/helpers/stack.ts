import { mediaWorkerScript } from './media-worker-bundle';
import type { DestinationStream } from 'pino';
import type { Config } from '../../src/config';
import { createLogger } from '../../src/lib/logger';
import { startEmulator } from '../../src/emulator/server';
import type { RunningEmulator } from '../../src/emulator/server';
import { startGateway } from '../../src/gateway/server';
import type { RunningGateway, ServerOptions } from '../../src/gateway/server';
import { buildStreamRecord } from '../../src/gateway/legacy/streams/stream-record';
import { FAST_RETRY, TEST_PUBLISHER, testConfig } from './config';
import { sleep } from './time';
import type { StreamRecord } from '../../src/gateway/store/store';

export const KEY = 'svc-local-dev';
export const KEY_B = 'svc-local-dev2';
export const KEY_BROKE = 'svc-local-broke';
export const KEY_REVOKED = 'svc-local-revoked';

export interface Stack {
  cfg: Config;
  emulator: RunningEmulator;
  gateway: RunningGateway;
  /** Gateway base URL. */
  url: string;
  close(): Promise<void>;
}

/**
 * A real emulator and a real gateway on loopback port 0, tuned for fast tests: synthetic publisher
 * on every stream (10 fps, small frames), quick first-frame polling, shrunk retry waits. `log`:
 * the gateway's log lines (level info) go there.
 */
export async function startStack(
  overrides: Record<string, unknown> = {},
  gwOpts: ServerOptions = {},
  opts: { log?: DestinationStream } = {},
): Promise<Stack> {
  const cfg = testConfig({ emulator: { autoPublish: TEST_PUBLISHER } }, overrides);
  const logger = createLogger(cfg.logLevel);
  const emulator = await startEmulator(cfg, logger);
  const gwLogger = opts.log ? createLogger('info', 'gateway', opts.log) : logger;
  // The media worker runs from a bundle (jest runs the sources; the replica forks a script).
  const mediaWorker = { script: await mediaWorkerScript() };
  const gateway = await startGateway(cfg, gwLogger, emulator.url, { retry: FAST_RETRY, mediaWorker, ...gwOpts });
  return {
    cfg,
    emulator,
    gateway,
    url: gateway.url,
    async close() {
      await gateway.close();
      await emulator.close();
    },
  };
}

export interface Http {
  status: number;
  body: unknown;
  headers: Headers;
}

export async function http(
  url: string,
  method: string,
  path: string,
  opts: { key?: string | null; body?: unknown; raw?: string } = {},
): Promise<Http> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (opts.key !== null) headers.authorization = `Bearer ${opts.key ?? KEY}`;
  const res = await fetch(`${url}${path}`, {
    method,
    headers,
    body: opts.raw ?? (opts.body === undefined ? undefined : JSON.stringify(opts.body)),
  });
  const text = await res.text();
  let body: unknown = text;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    /* not JSON: keep the text */
  }
  return { status: res.status, body, headers: res.headers };
}

export const clipBody = (over: Record<string, unknown> = {}, inference: Record<string, unknown> = {}) => ({
  mode: 'clip',
  processing: { target_fps: 2, clip_length_seconds: 1, delay_seconds: 0.5, ...over },
  inference: { prompt: 'What happens?', model: 'local/analyzer', ...inference },
});

export const frameBody = (over: Record<string, unknown> = {}, inference: Record<string, unknown> = {}) => ({
  mode: 'frame',
  processing: { interval_seconds: 0.5, ...over },
  inference: { prompt: 'Describe the frame', model: 'local/analyzer', ...inference },
});

/**
 * `POST /v0.2/chat/completions/clip` (reinfer) as the Python SDK calls it: a 404 is retried (the
 * window of a just-delivered result may not be written yet), here every 100 ms up to 2 s.
 */
export async function reinfer(url: string, body: Record<string, unknown>, key: string | null = KEY): Promise<Http> {
  let r = await http(url, 'POST', '/v0.2/chat/completions/clip', { key, body });
  for (let i = 0; i < 20 && r.status === 404; i++) {
    await sleep(100);
    r = await http(url, 'POST', '/v0.2/chat/completions/clip', { key, body });
  }
  return r;
}

/** Parses the analyzer's machine-readable tail. */
export function tail(text: string): { frames: number; first: number; last: number; spanMs: number; pattern: [number, number] | null } {
  const m = /\[frames=(\d+) index=(\d+)\.\.(\d+) span_ms=(\d+) pattern=(?:(\d+)\.\.(\d+)|none)\]\s*$/.exec(text);
  if (!m) throw new Error(`no analyzer tail in ${JSON.stringify(text)}`);
  return {
    frames: Number(m[1]),
    first: Number(m[2]),
    last: Number(m[3]),
    spanMs: Number(m[4]),
    pattern: m[5] === undefined ? null : [Number(m[5]), Number(m[6])],
  };
}

/** A stack for the enclosing describe block: started before its tests, closed after them. */
export function useStack(overrides: Record<string, unknown> = {}): () => Stack {
  let s: Stack | undefined;
  beforeAll(async () => {
    s = await startStack(overrides);
  });
  afterAll(async () => {
    await s?.close();
  });
  return () => s!;
}

/** An active legacy stream record for tests that put streams straight into a store. */
export const streamRecord = (streamId: string, accountId = 'a'): StreamRecord =>
  buildStreamRecord({
    streamId,
    keyHash: 'k',
    slotId: 's',
    accountId,
    nowMs: Date.now(),
    leaseExpiresAtMs: Date.now() + 60_000,
    prompt: 'p',
    spec: {},
    owner: null,
  });

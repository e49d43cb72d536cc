/**
 * A real emulator context behind a real HTTP server on 127.0.0.1:0, with the completion, model and
 * billing routes. Kept small on purpose: it can later be backed by the full emulator app factory.
 */
import http from 'node:http';
import express from 'express';
import { brandOf } from '../../src/brand';
import { loadConfig } from '../../src/config';
import { Accounts } from '../../src/emulator/accounts';
import { billingRouter } from '../../src/emulator/billing';
import { completionsRouter } from '../../src/emulator/completions';
import type { EmulatorContext } from '../../src/emulator/context';
import { FaultInjector } from '../../src/emulator/faults';
import { renderPatternRgb } from '../../src/emulator/frames/pattern';
import type { StoredFrame } from '../../src/emulator/frames/types';
import { errorHandler, regionCheck } from '../../src/emulator/http';
import { ModelRegistry, modelsRouter } from '../../src/emulator/models/registry';
import type { EmulatedStream } from '../../src/emulator/streams';
import { StreamRegistry } from '../../src/emulator/streams';
import { closeServer, listen } from '../../src/lib/listen';
import { createLogger } from '../../src/lib/logger';

export interface PublishOptions {
  fps?: number;
  width?: number;
  height?: number;
  /** Capture time of the last frame (default: now). */
  endAtMs?: number;
}

export interface Harness {
  url: string;
  ctx: EmulatorContext;
  /** The HTTP server (a test can watch requests arrive and connections close on the emulator's side). */
  server: http.Server;
  close(): Promise<void>;
  /** Creates a stream for the account of this API key. */
  addStream(key: string): EmulatedStream;
  /** Ingests n test-pattern frames spaced 1000/fps ms apart, the last captured at `endAtMs`; resolves once visible. */
  publish(stream: EmulatedStream, n: number, opts?: PublishOptions): Promise<StoredFrame[]>;
}

export async function startHarness(overrides: Record<string, unknown> = {}, opts: { now?: () => number } = {}): Promise<Harness> {
  const cfg = loadConfig({ env: {}, overrides });
  const now = opts.now ?? Date.now;
  const streams = new StreamRegistry(cfg.emulator, now);
  let url = '';
  const ctx: EmulatorContext = {
    cfg,
    brand: brandOf(cfg),
    logger: createLogger('silent'),
    accounts: new Accounts(cfg.emulator.accounts),
    streams,
    models: new ModelRegistry(cfg.emulator.models),
    faults: new FaultInjector(),
    whipFaults: new FaultInjector(),
    roomKeys: { apiKey: cfg.emulator.room.apiKey, apiSecret: cfg.emulator.room.apiSecret },
    publishUrl: () => 'ws://127.0.0.1:0',
    baseUrl: () => url,
    now,
  };
  const app = express();
  app.use(express.json({ limit: cfg.emulator.maxBodyBytes }));
  app.use('/v1beta/chat', regionCheck(ctx));
  app.use('/v1beta', completionsRouter(ctx));
  app.use('/v1beta', modelsRouter(ctx));
  app.use('/billing', billingRouter(ctx));
  app.use(errorHandler(ctx));
  const server = http.createServer(app);
  const port = await listen(server, 0, '127.0.0.1');
  url = `http://127.0.0.1:${port}`;

  return {
    url,
    ctx,
    server,
    async close() {
      streams.close();
      await closeServer(server);
    },
    addStream(key) {
      return streams.create(ctx.accounts.authenticate(`Bearer ${key}`));
    },
    async publish(stream, n, opts = {}) {
      const { fps = 10, width = 64, height = 48, endAtMs = Date.now() } = opts;
      const step = 1000 / fps;
      const pending: Promise<StoredFrame | undefined>[] = [];
      for (let i = 0; i < n; i++) {
        const capturedAtMs = Math.round(endAtMs - (n - 1 - i) * step);
        const raw = { width, height, format: 'rgb' as const, data: renderPatternRgb(stream.frames.nextIndex, width, height) };
        pending.push(stream.frames.ingest(raw, capturedAtMs));
      }
      const frames = await Promise.all(pending);
      await stream.frames.drain();
      return frames.filter((f): f is StoredFrame => f !== undefined);
    },
  };
}

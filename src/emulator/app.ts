import type http from 'node:http';
import type { Duplex } from 'node:stream';
import express from 'express';
import type { Express } from 'express';
import { brandOf } from '../brand';
import type { Config } from '../config';
import { detailError } from '../lib/errors';
import type { Logger } from '../lib/logger';
import { Accounts } from './accounts';
import { billingRouter } from './billing';
import { completionsRouter } from './completions';
import type { EmulatorContext } from './context';
import { controlRouter } from './control';
import { FaultInjector } from './faults';
import { errorHandler, regionCheck } from './http';
import { ModelRegistry, modelsRouter } from './models/registry';
import { SyntheticPublishers } from './publishers';
import { MediaRoomServer } from './room';
import { StreamRegistry } from './streams';
import { streamsRouter } from './streams-routes';

/** The room participant the synthetic test pattern appears as (no token the emulator mints names it). */
export const SYNTHETIC_IDENTITY = 'synthetic-pattern';

export interface Emulator {
  app: Express;
  ctx: EmulatorContext;
  publishers: SyntheticPublishers;
  /** The media room server behind `publish.url` and `view.url`. */
  room: MediaRoomServer;
  /** Routes a WebSocket upgrade (the media room); false when the path is not the emulator's. */
  handleUpgrade(req: http.IncomingMessage, socket: Duplex, head: Buffer): boolean;
  close(): Promise<void>;
}

export interface EmulatorOptions {
  /** http:// base URL clients reach the emulator at (default: `publishUrl` with http for ws). */
  baseUrl?: () => string;
  /** The clock of leases, frames, rate limits and checkout sessions (default `Date.now`). */
  now?: () => number;
}

/** Builds the emulator (no listen): state, routes and the media room. */
export function createEmulator(cfg: Config, logger: Logger, publishUrl: () => string, opts: EmulatorOptions = {}): Emulator {
  const now = opts.now ?? Date.now;
  const streams = new StreamRegistry(cfg.emulator, now);
  const ctx: EmulatorContext = {
    cfg,
    brand: brandOf(cfg),
    logger,
    accounts: new Accounts(cfg.emulator.accounts),
    streams,
    models: new ModelRegistry(cfg.emulator.models, cfg.emulator.charsPerToken),
    faults: new FaultInjector(),
    whipFaults: new FaultInjector(),
    roomKeys: { apiKey: cfg.emulator.room.apiKey, apiSecret: cfg.emulator.room.apiSecret },
    publishUrl,
    baseUrl: opts.baseUrl ?? (() => publishUrl().replace(/^ws/, 'http')),
    now,
  };
  // The media room behind `publish.url`: stock LiveKit clients publish into a stream's room, and
  // viewers (`viewer-token`) watch it.
  const room = new MediaRoomServer({
    keys: ctx.roomKeys,
    logger: logger.child({ component: 'room' }),
    whip: { ...cfg.emulator.room.whip, takeFault: () => ctx.whipFaults.take('whip') },
    resolveRoom: (name) => {
      const stream = streams.get(name);
      if (!stream || stream.state !== 'active') return undefined;
      return {
        onFrame: (raw) => {
          stream.frames.ingest(raw).catch((err: unknown) => logger.warn({ err, stream: name }, 'room frame dropped'));
        },
        // Real video replaces the test pattern: the two never interleave in one stream's windows.
        onPublication: () => {
          if (publishers.stop(stream.id)) logger.info({ stream: name }, 'real publisher joined: synthetic publisher stopped');
        },
      };
    },
  });
  // The test pattern is the room's video too while no client publishes there (viewers see it).
  const publishers = new SyntheticPublishers(streams, logger, cfg.emulator.autoPublish, (stream, opts) =>
    room.publishServerVideo(stream.id, {
      identity: SYNTHETIC_IDENTITY,
      name: 'Synthetic test pattern',
      width: opts.width,
      height: opts.height,
    }),
  );
  // A stream that ends takes its room down (publisher and subscribers are told to leave).
  streams.onEnd((s) => room.closeRoom(s.id));

  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.use(express.json({ limit: cfg.emulator.maxBodyBytes, type: ['application/json', 'application/*+json'] }));
  app.use(room.router());
  app.get('/healthz', (_req, res) => {
    res.type('text/plain').send('ok');
  });
  const region = regionCheck(ctx);
  app.use('/v1beta/streams', region);
  app.use('/v1beta/chat', region);
  app.use('/v1beta', streamsRouter(ctx));
  app.use('/v1beta', completionsRouter(ctx));
  app.use('/v1beta', modelsRouter(ctx));
  app.use('/billing', billingRouter(ctx));
  if (cfg.emulator.controlApi) app.use('/_emulator', controlRouter(ctx, publishers, room));
  app.use((req) => {
    throw detailError(404, 'not_found', `No route for ${req.method} ${req.path}`);
  });
  app.use(errorHandler(ctx));

  return {
    app,
    ctx,
    publishers,
    room,
    handleUpgrade: (req, socket, head) => room.handleUpgrade(req, socket, head),
    async close() {
      publishers.stopAll();
      streams.close();
      await room.close();
    },
  };
}

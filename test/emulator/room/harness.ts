/**
 * A standalone room server for tests: http + express mounting `router()`, upgrades routed to
 * `handleUpgrade`, on 127.0.0.1 port 0, with sinks that collect frames per room.
 */
import crypto from 'node:crypto';
import http from 'node:http';
import express from 'express';
import { closeServer, listen } from '../../../src/lib/listen';
import { createLogger } from '../../../src/lib/logger';
import type { RawFrame } from '../../../src/emulator/frames/types';
import { MediaRoomServer } from '../../../src/emulator/room';
import type { MediaRoomOptions, RoomFrameSink, RoomKeys } from '../../../src/emulator/room';

export const TEST_KEYS: RoomKeys = { apiKey: 'APItestkey', apiSecret: 'test-secret-that-is-long-enough-000000' };

/** Collects what a room's sink receives. */
export class FrameCollector implements RoomFrameSink {
  count = 0;
  readonly sizes = new Map<string, number>();
  readonly arrivals: number[] = [];
  last: RawFrame | undefined;
  private readonly waiters: { predicate: () => boolean; resolve: () => void }[] = [];

  onFrame(raw: RawFrame): void {
    this.count += 1;
    this.arrivals.push(Date.now());
    const key = `${raw.width}x${raw.height}`;
    this.sizes.set(key, (this.sizes.get(key) ?? 0) + 1);
    this.last = raw;
    for (const w of [...this.waiters]) {
      if (w.predicate()) {
        this.waiters.splice(this.waiters.indexOf(w), 1);
        w.resolve();
      }
    }
  }

  /** Resolves once `predicate` holds (checked on every frame); rejects after `timeoutMs`. */
  until(predicate: () => boolean, timeoutMs: number, what = 'frames'): Promise<void> {
    if (predicate()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const entry = {
        predicate,
        resolve: () => {
          clearTimeout(timer);
          resolve();
        },
      };
      const timer = setTimeout(() => {
        this.waiters.splice(this.waiters.indexOf(entry), 1);
        reject(new Error(`timed out waiting for ${what} (got ${this.count}: ${JSON.stringify([...this.sizes])})`));
      }, timeoutMs);
      this.waiters.push(entry);
    });
  }

  /** Frames per second over the arrivals of the last `windowMs`. */
  fps(windowMs: number): number {
    const since = Date.now() - windowMs;
    return this.arrivals.filter((t) => t >= since).length / (windowMs / 1000);
  }
}

/** Mean of the Y plane of an I420 frame. */
export function meanLuma(frame: RawFrame): number {
  const n = frame.width * frame.height;
  let sum = 0;
  for (let i = 0; i < n; i += 1) sum += frame.data[i];
  return sum / n;
}

export interface RoomHarness {
  server: MediaRoomServer;
  http: http.Server;
  /** ws://127.0.0.1:port */
  wsUrl: string;
  /** http://127.0.0.1:port */
  httpUrl: string;
  app: express.Express;
  /** Makes a room joinable; returns its collector. */
  openRoom(name: string): FrameCollector;
  /** Makes a room unjoinable (stream ended). */
  endRoom(name: string): void;
  close(): Promise<void>;
}

export async function startRoomHarness(
  opts: Pick<MediaRoomOptions, 'pingIntervalSeconds' | 'pingTimeoutSeconds' | 'whip'> = {},
): Promise<RoomHarness> {
  const sinks = new Map<string, FrameCollector>();
  const logger = createLogger(process.env.ROOM_TEST_LOG ?? 'silent', 'room-test');
  const server = new MediaRoomServer({
    keys: TEST_KEYS,
    logger,
    resolveRoom: (room) => sinks.get(room),
    ...opts,
  });
  const app = express();
  app.use(server.router());
  const httpServer = http.createServer(app);
  httpServer.on('upgrade', (req, socket, head) => {
    if (!server.handleUpgrade(req, socket, head)) socket.destroy();
  });
  const port = await listen(httpServer, 0, '127.0.0.1');
  return {
    server,
    http: httpServer,
    app,
    wsUrl: `ws://127.0.0.1:${port}`,
    httpUrl: `http://127.0.0.1:${port}`,
    openRoom(name) {
      const collector = new FrameCollector();
      sinks.set(name, collector);
      return collector;
    },
    endRoom(name) {
      sinks.delete(name);
      server.closeRoom(name);
    },
    async close() {
      await server.close();
      await closeServer(httpServer);
    },
  };
}

/** A hand-signed HS256 room JWT, for claims the SDK will not mint (expired, no roomJoin). */
export function signRoomJwt(keys: RoomKeys, payload: Record<string, unknown>): string {
  const b64 = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');
  const head = b64({ alg: 'HS256', typ: 'JWT' });
  const body = b64({ iss: keys.apiKey, ...payload });
  const sig = crypto.createHmac('sha256', keys.apiSecret).update(`${head}.${body}`).digest('base64url');
  return `${head}.${body}.${sig}`;
}

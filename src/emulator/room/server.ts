import { STATUS_CODES } from 'node:http';
import type http from 'node:http';
import type stream from 'node:stream';
import { DisconnectReason } from '@livekit/protocol';
import express from 'express';
import { WebSocketServer } from 'ws';
import type WebSocket from 'ws';
import { ServiceError, detailError } from '../../lib/errors';
import type { Logger } from '../../lib/logger';
import { authorizeJoin, tokenFromRequest } from './auth';
import type { RoomGrant } from './auth';
import { Participant, refuseResume } from './participant';
import { MediaRoom } from './room';
import type { ServerVideo, ServerVideoOptions } from './server-video';
import { parseJoinParams } from './signal';
import type { JoinParams, SignalPath } from './signal';
import type { MediaRoomOptions, RoomFrameSink, RoomStats } from './types';
import { WHIP_TIMING, WhipParticipant } from './whip-participant';
import { whipRouter } from './whip-routes';

const DEFAULT_PING_INTERVAL_SECONDS = 5;
const DEFAULT_PING_TIMEOUT_SECONDS = 15;
/** Signal frames are small; the largest is an offer of a few KiB. */
const MAX_SIGNAL_FRAME_BYTES = 1 << 20;
const VALIDATE_PATHS = ['/rtc/validate', '/rtc/v1/validate'];

interface Admission {
  grant: RoomGrant;
  sink: RoomFrameSink;
  join: JoinParams;
}

function signalPathOf(pathname: string): SignalPath | undefined {
  if (pathname === '/rtc' || pathname === '/rtc/') return 'v0';
  if (pathname === '/rtc/v1' || pathname === '/rtc/v1/') return 'v1';
  return undefined;
}

function requestUrl(req: http.IncomingMessage & { originalUrl?: string }): URL {
  try {
    return new URL(req.originalUrl ?? req.url ?? '/', 'http://localhost');
  } catch {
    return new URL('http://localhost/');
  }
}

function asServiceError(err: unknown): ServiceError {
  if (err instanceof ServiceError) return err;
  return detailError(500, 'room_internal_error', 'internal error');
}

/** Answers a refused upgrade with a plain HTTP status and the reason as text. */
function rejectUpgrade(socket: stream.Duplex, err: ServiceError): void {
  if (socket.destroyed) return;
  const body = err.message;
  socket.once('finish', () => socket.destroy());
  socket.end(
    `HTTP/1.1 ${err.status} ${STATUS_CODES[err.status] ?? 'Error'}\r\n` +
      'Connection: close\r\nContent-Type: text/plain; charset=utf-8\r\n' +
      `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
  );
}

/**
 * The emulator's media rooms, speaking LiveKit's signalling protocol so stock clients
 * (`livekit-client`, `@livekit/rtc-node`) can publish into a stream and subscribe to it.
 * See README.md in this folder for the protocol subset and its limits.
 */
export class MediaRoomServer {
  private readonly rooms = new Map<string, MediaRoom>();
  /** Server-made video by room, handed to the room when it exists (rooms are made by joins). */
  private readonly serverVideos = new Map<string, ServerVideoOptions>();
  private readonly wss = new WebSocketServer({ noServer: true, maxPayload: MAX_SIGNAL_FRAME_BYTES });
  private readonly upgrading = new Set<stream.Duplex>();
  /** WHIP publishers by participant id (the resource their `Location` names). */
  private readonly whipSessions = new Map<string, WhipParticipant>();
  private readonly logger: Logger;
  private readonly pingIntervalSeconds: number;
  private readonly pingTimeoutSeconds: number;
  private closing: Promise<void> | undefined;

  constructor(private readonly opts: MediaRoomOptions) {
    this.logger = opts.logger.child({ component: 'media-room' });
    this.pingIntervalSeconds = Math.max(1, Math.round(opts.pingIntervalSeconds ?? DEFAULT_PING_INTERVAL_SECONDS));
    this.pingTimeoutSeconds = Math.max(this.pingIntervalSeconds + 1, Math.round(opts.pingTimeoutSeconds ?? DEFAULT_PING_TIMEOUT_SECONDS));
  }

  /** Handles /rtc and /rtc/v1 WebSocket upgrades; returns false for other paths (caller then tries others). */
  handleUpgrade(req: http.IncomingMessage, socket: stream.Duplex, head: Buffer): boolean {
    const url = requestUrl(req);
    const path = signalPathOf(url.pathname);
    if (!path) return false;
    if (this.closing) {
      rejectUpgrade(socket, detailError(503, 'room_server_closing', 'media room server is shutting down'));
      return true;
    }
    // Until ws owns the socket, a reset must not become an unhandled 'error'.
    const onError = (err: Error) => this.logger.debug({ err: err.message }, 'upgrade socket error');
    socket.on('error', onError);
    this.upgrading.add(socket);
    void this.admit(req, socket, head, url, path).finally(() => {
      this.upgrading.delete(socket);
      socket.off('error', onError);
    });
    return true;
  }

  private async admit(req: http.IncomingMessage, socket: stream.Duplex, head: Buffer, url: URL, path: SignalPath): Promise<void> {
    let admission: Admission;
    try {
      admission = await this.check(req, url, path);
    } catch (err) {
      const error = asServiceError(err);
      this.logger.info({ path, status: error.status, reason: error.message }, 'room join refused');
      rejectUpgrade(socket, error);
      return;
    }
    if (this.closing || socket.destroyed) {
      socket.destroy();
      return;
    }
    this.wss.handleUpgrade(req, socket, head, (ws) => this.attach(ws, admission));
  }

  /**
   * Token (signature, expiry, roomJoin, room), room existence, and the signalling path. A
   * participant that may subscribe gets 404 on /rtc/v1: both SDKs then fall back to /rtc, where
   * the server-offered subscriber connection carries its subscriptions.
   */
  private async check(req: http.IncomingMessage, url: URL, path: SignalPath): Promise<Admission> {
    const grant = await authorizeJoin(this.opts.keys, tokenFromRequest(req, url));
    const sink = this.opts.resolveRoom(grant.room);
    if (!sink) {
      if (this.rooms.has(grant.room)) this.closeRoom(grant.room);
      throw detailError(404, 'room_not_found', 'requested room does not exist');
    }
    if (path === 'v1' && grant.canSubscribe) {
      throw detailError(404, 'room_v1_publish_only', 'rtc/v1 serves publish-only participants here; subscribers use /rtc');
    }
    let join: JoinParams;
    try {
      join = parseJoinParams(url, path);
    } catch {
      throw detailError(400, 'room_bad_join_request', 'join_request is not a valid WrappedJoinRequest');
    }
    return { grant, sink, join };
  }

  private attach(ws: WebSocket, { grant, sink, join }: Admission): void {
    if (this.closing) {
      ws.terminate();
      return;
    }
    if (join.reconnect) {
      // Sessions end with their socket, so there is nothing to resume: ↓ leave RECONNECT → full rejoin.
      this.logger.info({ room: grant.room, identity: grant.identity }, 'resume refused: unknown participant');
      void refuseResume(ws);
      return;
    }
    const room = this.roomFor(grant.room, sink);
    const participant = new Participant({
      room,
      ws,
      grant,
      join,
      logger: this.logger,
      pingIntervalSeconds: this.pingIntervalSeconds,
      pingTimeoutSeconds: this.pingTimeoutSeconds,
    });
    participant.start();
  }

  /** The room `name` as a join finds it: made on the first admitted join, its sink the latest one. */
  private roomFor(name: string, sink: RoomFrameSink): MediaRoom {
    let room = this.rooms.get(name);
    if (!room || room.isClosed) {
      room = new MediaRoom(name, sink, this.logger.child({ room: name }));
      this.rooms.set(name, room);
      const video = this.serverVideos.get(name);
      if (video) room.attachServerVideo(video);
    } else {
      room.setSink(sink);
    }
    return room;
  }

  /** A WHIP publisher joins `grant.room` and answers `offerSdp` (./whip-participant.ts). */
  private async openWhip(grant: RoomGrant, sink: RoomFrameSink, offerSdp: string) {
    if (this.closing) throw new Error('media room server is shutting down');
    const participant = new WhipParticipant({
      room: this.roomFor(grant.room, sink),
      grant,
      logger: this.logger,
      timing: { ...WHIP_TIMING, ...this.opts.whip?.timing },
      onGone: (p) => {
        if (this.whipSessions.get(p.sid) === p) this.whipSessions.delete(p.sid);
      },
    });
    this.whipSessions.set(participant.sid, participant);
    try {
      return { participant, answerSdp: await participant.answer(offerSdp) };
    } catch (err) {
      await participant.end('offer refused');
      throw err;
    }
  }

  /** WHIP sessions (publishers without a signalling socket) in every room now. */
  get whipSessionCount(): number {
    return this.whipSessions.size;
  }

  /**
   * Express router for GET /rtc/validate and /rtc/v1/validate (with Access-Control-Allow-Origin)
   * and, unless `whip.enabled` is false, WHIP at /whip/v1 (./whip-routes.ts).
   */
  router(): express.Router {
    const router = express.Router();
    if (this.opts.whip?.enabled !== false) {
      router.use(
        whipRouter({
          logger: this.logger,
          keys: this.opts.keys,
          iceServers: this.opts.whip?.iceServers ?? [],
          resolveRoom: (name) => (this.closing ? undefined : this.opts.resolveRoom(name)),
          open: (grant, sink, offer) => this.openWhip(grant, sink, offer),
          session: (id) => this.whipSessions.get(id),
          takeFault: this.opts.whip?.takeFault,
        }),
      );
    }
    const cors = (res: express.Response) => {
      res.set('Access-Control-Allow-Origin', '*');
      res.set('Access-Control-Allow-Methods', 'GET, OPTIONS');
      res.set('Access-Control-Allow-Headers', 'Authorization');
    };
    router.options(VALIDATE_PATHS, (_req, res) => {
      cors(res);
      res.sendStatus(204);
    });
    router.get(VALIDATE_PATHS, (req, res) => {
      cors(res);
      const path: SignalPath = req.path.startsWith('/rtc/v1') ? 'v1' : 'v0';
      this.check(req, requestUrl(req), path).then(
        () => void res.type('text/plain').send('success'),
        (err: unknown) => {
          const error = asServiceError(err);
          res.status(error.status).type('text/plain').send(error.message);
        },
      );
    });
    return router;
  }

  /**
   * Publishes server-made video (the stream's synthetic test pattern) into `room` as participant
   * `opts.identity`: subscribers receive it like a client's camera while no client publishes
   * video there. Frames cost nothing until a subscriber watches (`watched`); then each one is
   * encoded per subscriber connection. One per room: a second replaces the first.
   */
  publishServerVideo(room: string, opts: ServerVideoOptions): ServerVideo {
    const entry = { ...opts };
    this.serverVideos.set(room, entry);
    this.rooms.get(room)?.attachServerVideo(entry);
    const current = () => (this.serverVideos.get(room) === entry ? this.rooms.get(room) : undefined);
    return {
      get watched() {
        return current()?.serverVideoWatched ?? false;
      },
      push: (frame) => current()?.pushServerVideo(frame),
      stop: () => {
        if (this.serverVideos.get(room) !== entry) return;
        this.serverVideos.delete(room);
        this.rooms.get(room)?.detachServerVideo();
      },
    };
  }

  /** Ends every participant of a room (stream ended or deleted): ↓ leave{action DISCONNECT}, close PCs. */
  closeRoom(room: string): void {
    const existing = this.rooms.get(room);
    if (!existing) return;
    this.rooms.delete(room);
    void existing.close(DisconnectReason.ROOM_DELETED);
  }

  stats(room: string): RoomStats | undefined {
    return this.rooms.get(room)?.stats();
  }

  /** Everything torn down: rooms, participants, peer connections, pending upgrades. */
  close(): Promise<void> {
    this.closing ??= this.shutdown();
    return this.closing;
  }

  private async shutdown(): Promise<void> {
    for (const socket of this.upgrading) socket.destroy();
    this.upgrading.clear();
    const rooms = [...this.rooms.values()];
    this.rooms.clear();
    this.serverVideos.clear();
    await Promise.all(rooms.map((room) => room.close(DisconnectReason.SERVER_SHUTDOWN)));
    for (const ws of this.wss.clients) ws.terminate();
    await new Promise<void>((resolve) => this.wss.close(() => resolve()));
  }
}

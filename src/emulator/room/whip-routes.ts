/**
 * `/whip/v1`: WHIP (RFC 9725) publishing into a room, as LiveKit servers (1.9+) serve it
 * (`pkg/service/whipservice.go`): POST an offer → 201 with the answer, `Location`, `ETag` and one
 * `Link` per ICE server; PATCH trickles (`application/trickle-ice-sdpfrag`, `If-Match` required);
 * DELETE ends the session; GET answers 204 and OPTIONS 200 (CORS). Errors are `{"error": "…"}`,
 * except a refused token, which is answered in plain text before any handler runs (LiveKit's auth
 * middleware does the same). The POST's error bodies carry `Content-Type: application/sdp`, as
 * LiveKit sets it before validating.
 */
import express from 'express';
import type { Request, Response, Router } from 'express';
import { undecodableVideo } from '../../lib/sdp';
import type { Logger } from '../../lib/logger';
import type { FaultSpec } from '../faults';
import { authorizeJoin, tokenFromRequest } from './auth';
import type { RoomGrant } from './auth';
import type { WhipParticipant } from './whip-participant';
import type { RoomFrameSink } from './types';

/** What wrtc (libwebrtc M106 as built) decodes: the room says so plainly to an offer it cannot take. */
export const ROOM_DECODABLE_VIDEO: readonly string[] = ['VP8', 'VP9', 'AV1'];

/** An offer larger than this is refused (413): offers are a few KiB. */
const MAX_OFFER_BYTES = 128 * 1024;

/** An ICE server the room names in `Link` headers (its clients' TURN/STUN). */
export interface WhipIceServer {
  urls: string[];
  username?: string;
  credential?: string;
}

/** What the routes need of the room server. */
export interface WhipHost {
  logger: Logger;
  keys: Parameters<typeof authorizeJoin>[0];
  iceServers: readonly WhipIceServer[];
  /** The sink of an existing room (undefined: no such room or stream). */
  resolveRoom(room: string): RoomFrameSink | undefined;
  /** A new publisher in `grant.room`; resolves with it and its answer. */
  open(grant: RoomGrant, sink: RoomFrameSink, offerSdp: string): Promise<{ participant: WhipParticipant; answerSdp: string }>;
  session(participantId: string): WhipParticipant | undefined;
  /** A fault armed for the next POST (`/_emulator/whip/faults`), if any. */
  takeFault?(): FaultSpec | undefined;
}

class WhipHttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    /** Plain text (a refused token), not `{"error": …}`. */
    readonly plain = false,
  ) {
    super(message);
  }
}

function cors(res: Response): void {
  res.set('Access-Control-Allow-Origin', '*');
  res.set('Access-Control-Expose-Headers', 'Location, ETag, Link');
}

function sendError(res: Response, err: unknown, logger: Logger): void {
  if (res.headersSent) return;
  const e = err instanceof WhipHttpError ? err : new WhipHttpError(500, 'internal error');
  if (!(err instanceof WhipHttpError)) logger.error({ err }, 'WHIP request failed');
  cors(res);
  res.status(e.status);
  if (e.plain) res.type('text/plain').send(e.message);
  else {
    if (!res.get('Content-Type')) res.type('application/json');
    res.send(Buffer.from(JSON.stringify({ error: e.message })));
  }
}

/** The request body as text, at most `MAX_OFFER_BYTES` (413 beyond). */
async function readBody(req: Request): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_OFFER_BYTES) throw new WhipHttpError(413, `body over ${MAX_OFFER_BYTES} bytes`);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/**
 * The token's grant (signature, expiry, roomJoin, room, identity). A token that does not verify is
 * refused in plain text, as LiveKit's auth middleware does before any handler; a missing one by the
 * handler (`{"error": …}`).
 */
async function grantOf(host: WhipHost, req: Request): Promise<RoomGrant> {
  const token = tokenFromRequest(req, new URL(req.originalUrl, 'http://localhost'));
  if (!token) throw new WhipHttpError(401, 'permissions denied');
  try {
    return await authorizeJoin(host.keys, token);
  } catch (err) {
    throw new WhipHttpError(401, (err as Error).message, true);
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms).unref());

export function whipRouter(host: WhipHost): Router {
  const r = express.Router();
  const handle = (fn: (req: Request, res: Response) => Promise<void>) => (req: Request, res: Response) =>
    void fn(req, res).catch((err: unknown) => sendError(res, err, host.logger));

  r.options(['/whip/v1', '/whip/v1/:id'], (_req, res) => {
    cors(res);
    res.set('Access-Control-Allow-Headers', '*');
    res.set('Access-Control-Allow-Methods', 'PATCH, OPTIONS, GET, POST, DELETE');
    res.sendStatus(200);
  });
  r.get(['/whip/v1', '/whip/v1/:id'], (_req, res) => {
    cors(res);
    res.sendStatus(204);
  });

  r.post(
    '/whip/v1',
    handle(async (req, res) => {
      const type = req.get('content-type');
      res.set('Content-Type', 'application/sdp');
      if (type !== 'application/sdp') throw new WhipHttpError(400, `unsupported content-type: ${type ?? ''}`);
      const grant = await grantOf(host, req);
      const fault = host.takeFault?.();
      if (fault?.latencyMs) await sleep(fault.latencyMs);
      // A client that gave up during the delay gets nothing (a timed-out WHIP client made no session).
      if (fault?.reset || req.socket.destroyed) return void req.socket.destroy();
      if (fault?.status) throw new WhipHttpError(fault.status, fault.message ?? 'injected fault');
      if (!grant.canPublish) throw new WhipHttpError(401, 'token does not grant canPublish');
      const offer = await readBody(req);
      if (!offer.trim()) throw new WhipHttpError(400, 'body does not have SDP offer');
      if (!/^v=0\r?$/m.test(offer)) throw new WhipHttpError(400, 'malformed SDP offer: expected "v=0"');
      const undecodable = undecodableVideo(offer, ROOM_DECODABLE_VIDEO, 'this room');
      if (undecodable) throw new WhipHttpError(400, undecodable);
      const sink = host.resolveRoom(grant.room);
      if (!sink) throw new WhipHttpError(404, 'requested room does not exist');
      let opened;
      try {
        opened = await host.open(grant, sink, offer);
      } catch (err) {
        throw new WhipHttpError(400, `malformed SDP offer: ${(err as Error).message}`);
      }
      cors(res);
      res.set('Location', `/whip/v1/${opened.participant.sid}`);
      if (opened.participant.etag) res.set('ETag', opened.participant.etag);
      const links = host.iceServers.flatMap((s) =>
        s.urls.map((url) => {
          const params = [`rel="ice-server"`];
          if (s.username) params.push(`username="${s.username}"`);
          if (s.credential) params.push(`credential="${s.credential}"`);
          return `<${encodeURI(url).replace(/\?/g, '%3F')}>; ${params.join('; ')}`;
        }),
      );
      if (links.length) res.set('Link', links);
      res.status(201).send(Buffer.from(opened.answerSdp)); // a Buffer: no charset appended to the type
    }),
  );

  /** The session a PATCH or DELETE names, for the same token's room and identity (404 otherwise). */
  const sessionFor = async (req: Request): Promise<WhipParticipant> => {
    const grant = await grantOf(host, req);
    const session = host.session(String(req.params.id));
    if (!session || session.gone || session.identity !== grant.identity || session.roomName !== grant.room) {
      throw new WhipHttpError(404, 'participant not found');
    }
    return session;
  };

  r.patch(
    '/whip/v1/:id',
    handle(async (req, res) => {
      const type = req.get('content-type');
      res.set('Content-Type', 'application/trickle-ice-sdpfrag');
      if (type !== 'application/trickle-ice-sdpfrag') throw new WhipHttpError(400, `unsupported content-type: ${type ?? ''}`);
      const ifMatch = req.get('if-match');
      if (!ifMatch) throw new WhipHttpError(428, 'missing entity tag');
      const session = await sessionFor(req);
      const fragment = await readBody(req);
      if (ifMatch === '*') throw new WhipHttpError(405, 'ICE restart is not supported by this room');
      if (ifMatch !== session.etag) throw new WhipHttpError(400, 'ice credential mismatch');
      session.trickle(fragment);
      cors(res);
      res.status(204).end();
    }),
  );

  r.delete(
    '/whip/v1/:id',
    handle(async (req, res) => {
      const session = await sessionFor(req);
      await session.end('WHIP session deleted');
      cors(res);
      res.sendStatus(200);
    }),
  );
  return r;
}

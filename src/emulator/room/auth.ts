import type http from 'node:http';
import { detailError } from '../../lib/errors';
import type { ServiceError } from '../../lib/errors';
import { verifyRoomToken } from './tokens';
import type { RoomKeys } from './tokens';

/** What a verified room token lets its holder do. */
export interface RoomGrant {
  room: string;
  identity: string;
  name: string;
  canPublish: boolean;
  canSubscribe: boolean;
}

/** The JS client sends `access_token` in the query; rtc-node sends `Authorization: Bearer`. */
export function tokenFromRequest(req: http.IncomingMessage, url: URL): string | undefined {
  const header = req.headers.authorization;
  if (typeof header === 'string' && /^bearer\s+/i.test(header)) {
    const token = header.replace(/^bearer\s+/i, '').trim();
    if (token) return token;
  }
  return url.searchParams.get('access_token') || undefined;
}

export const unauthorized = (message: string): ServiceError => detailError(401, 'room_unauthorized', message);

/**
 * Verifies signature and expiry, then the grant: `roomJoin` and a room name are required. Like
 * LiveKit, an absent `canPublish` / `canSubscribe` means allowed (only an explicit false denies).
 */
export async function authorizeJoin(keys: RoomKeys, token: string | undefined): Promise<RoomGrant> {
  if (!token) throw unauthorized('no access token');
  let claims;
  try {
    claims = await verifyRoomToken(keys, token);
  } catch (err) {
    const reason = err instanceof Error ? err.message : 'verification failed';
    throw unauthorized(`invalid token: ${reason}`);
  }
  const video = claims.video;
  if (!video?.roomJoin) throw unauthorized('token does not grant roomJoin');
  if (!video.room) throw unauthorized('token grants no room');
  const identity = typeof claims.sub === 'string' ? claims.sub : '';
  if (!identity) throw unauthorized('token has no identity');
  return {
    room: video.room,
    identity,
    name: claims.name ?? identity,
    canPublish: video.canPublish !== false,
    canSubscribe: video.canSubscribe !== false,
  };
}

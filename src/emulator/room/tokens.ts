import { AccessToken, TokenVerifier } from 'livekit-server-sdk';
import type { ClaimGrants } from 'livekit-server-sdk';

export interface RoomKeys {
  apiKey: string;
  apiSecret: string;
}

/** A room token for one identity with exactly one of the publish or subscribe grants. */
async function mintToken(
  keys: RoomKeys,
  room: string,
  identity: string,
  ttlSeconds: number,
  role: 'publish' | 'subscribe',
): Promise<string> {
  const at = new AccessToken(keys.apiKey, keys.apiSecret, { identity, ttl: ttlSeconds });
  at.addGrant({ room, roomJoin: true, canPublish: role === 'publish', canSubscribe: role === 'subscribe', canPublishData: false });
  return at.toJwt();
}

/** Mints a publish-only room token: room = stream id, one publisher identity. */
export function mintPublishToken(keys: RoomKeys, room: string, identity: string, ttlSeconds: number): Promise<string> {
  return mintToken(keys, room, identity, ttlSeconds, 'publish');
}

/** Mints a subscribe-only room token: the viewer token of a stream, and the customer rooms of tests and the gateway's room source. */
export function mintSubscribeToken(keys: RoomKeys, room: string, identity: string, ttlSeconds: number): Promise<string> {
  return mintToken(keys, room, identity, ttlSeconds, 'subscribe');
}

/** Verifies signature and expiry; resolves the claims or rejects. */
export function verifyRoomToken(keys: RoomKeys, token: string): Promise<ClaimGrants> {
  return new TokenVerifier(keys.apiKey, keys.apiSecret).verify(token);
}

import { AccessToken, TokenVerifier } from 'livekit-server-sdk';
import type { ClaimGrants } from 'livekit-server-sdk';

export interface RoomKeys {
  apiKey: string;
  apiSecret: string;
}

/** Mints a publish-only room token: room = stream id, one publisher identity. */
export async function mintPublishToken(
  keys: RoomKeys,
  room: string,
  identity: string,
  ttlSeconds: number,
): Promise<string> {
  const at = new AccessToken(keys.apiKey, keys.apiSecret, { identity, ttl: ttlSeconds });
  at.addGrant({ room, roomJoin: true, canPublish: true, canSubscribe: false, canPublishData: false });
  return at.toJwt();
}

/** Mints a subscribe token for a room (tests and the gateway's room source use customer rooms). */
export async function mintSubscribeToken(
  keys: RoomKeys,
  room: string,
  identity: string,
  ttlSeconds: number,
): Promise<string> {
  const at = new AccessToken(keys.apiKey, keys.apiSecret, { identity, ttl: ttlSeconds });
  at.addGrant({ room, roomJoin: true, canPublish: false, canSubscribe: true, canPublishData: false });
  return at.toJwt();
}

/** Verifies signature and expiry; resolves the claims or rejects. */
export function verifyRoomToken(keys: RoomKeys, token: string): Promise<ClaimGrants> {
  return new TokenVerifier(keys.apiKey, keys.apiSecret).verify(token);
}

/**
 * Checks a customer's room token before the gateway joins with it. Only the customer's room can
 * verify the signature (the gateway has no key for it); what can be known here is checked: a
 * well-formed JWT, a grant to join a named room with subscribe permission, not expired.
 */
import { isRecord } from '../../lib/is-record';

export interface RoomTokenGrant {
  room: string;
  identity: string;
  /** Expiry (Unix seconds), when the token has one. */
  exp: number | undefined;
}

export type RoomTokenCheck = { ok: true; grant: RoomTokenGrant } | { ok: false; problem: string };

/** Room URL schemes a room client can dial (http(s) is upgraded to ws(s) by the client). */
const ROOM_URL_SCHEMES = new Set(['ws:', 'wss:', 'http:', 'https:']);

function decodeSegment(segment: string): unknown {
  if (!/^[A-Za-z0-9_-]+={0,2}$/.test(segment)) throw new Error('not base64url');
  return JSON.parse(Buffer.from(segment, 'base64url').toString('utf8'));
}

/**
 * `nowMs` is the check's clock; `minValidityMs` asks for a token that is still valid a little later
 * (the join itself takes a moment). LiveKit semantics: an absent `canSubscribe` means allowed.
 */
export function checkRoomToken(token: string, nowMs: number, minValidityMs = 0): RoomTokenCheck {
  const parts = token.trim().split('.');
  if (parts.length !== 3 || parts.some((p) => p.length === 0))
    return { ok: false, problem: 'token is not a JWT (expected three dot-separated parts)' };
  let header: unknown;
  let claims: unknown;
  try {
    header = decodeSegment(parts[0]!);
    claims = decodeSegment(parts[1]!);
  } catch {
    return { ok: false, problem: 'token is not a JWT (header or claims are not base64url JSON)' };
  }
  if (!isRecord(header) || typeof header.alg !== 'string' || header.alg === 'none')
    return { ok: false, problem: 'token is not a signed JWT' };
  if (!isRecord(claims)) return { ok: false, problem: 'token claims are not an object' };
  if (claims.exp !== undefined && (typeof claims.exp !== 'number' || !Number.isFinite(claims.exp))) {
    return { ok: false, problem: 'token exp is not a number' };
  }
  const exp = claims.exp as number | undefined;
  if (exp !== undefined && exp * 1000 <= nowMs + minValidityMs) return { ok: false, problem: 'token has expired' };
  const video = claims.video;
  if (!isRecord(video) || video.roomJoin !== true) return { ok: false, problem: 'token does not grant joining a room (video.roomJoin)' };
  if (typeof video.room !== 'string' || video.room.length === 0) return { ok: false, problem: 'token names no room (video.room)' };
  if (video.canSubscribe === false) return { ok: false, problem: 'token does not grant subscribing (video.canSubscribe is false)' };
  const identity = typeof claims.sub === 'string' ? claims.sub : '';
  if (!identity) return { ok: false, problem: 'token has no participant identity (sub)' };
  return { ok: true, grant: { room: video.room, identity, exp } };
}

/** Why a customer room URL cannot be dialled, or null when it can. */
export function roomUrlProblem(url: string): string | null {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return 'url is not a valid URL';
  }
  if (!ROOM_URL_SCHEMES.has(parsed.protocol)) return `url must be a ws://, wss://, http:// or https:// address, not ${parsed.protocol}`;
  return null;
}

/**
 * How a legacy stream ends and how its results sockets close (pure): the end reasons (the reason of
 * a 1001 close) and every other close code and text legacy clients classify.
 */
import type { Brand } from '../../../brand';
import type { Transport } from './spec';

/** End reason of every stream a shutting-down gateway ends (and of the sockets it closes). */
export const SERVER_SHUTDOWN = 'server_shutdown';

/**
 * End reason of a stream its client deleted (the legacy DELETE), or never had (a create whose media
 * could not start: no socket exists yet). Sockets close on it after `legacy.stopGraceMs`.
 */
export const CLIENT_REQUESTED = 'client_requested';

/** Close reasons of legacy WebSocket 1001 closes (the stream's end reason). */
export function legacyEndReasons(brand: Brand) {
  return {
    clientRequested: CLIENT_REQUESTED,
    leaseExpired: 'lease_expired',
    insufficientCredits: 'insufficient_credits',
    webrtcDisconnected: 'webrtc_disconnected',
    roomDisconnected: brand.roomDisconnected,
    serverShutdown: SERVER_SHUTDOWN,
    /**
     * The upstream stream was found ended or deleted, and not by this gateway on the client's
     * request (that ends the record first): the upstream expired it, or someone deleted it there.
     */
    upstreamEnded: 'upstream_ended',
  } as const;
}

/** A results-socket close: code and reason text, as legacy clients classify them. */
export interface LegacyClose {
  code: number;
  reason: string;
}

/**
 * Every results-socket close that is not a stream end (1001 + end reason). 1008 is fatal in legacy
 * clients (a refused key or stream), 1011 and 1013 are retried (could not check; try later).
 */
export const LEGACY_CLOSES = {
  authTimeout: { code: 1008, reason: 'authentication timeout' },
  badFirstMessage: { code: 1008, reason: 'first message must be {"api_key": "..."}' },
  authFailed: { code: 1008, reason: 'authentication failed' },
  streamNotFound: { code: 1008, reason: 'stream_not_found' },
  authRateLimited: { code: 1013, reason: 'too many failed authentications' },
  authUnavailable: { code: 1011, reason: 'authorization unavailable' },
  /**
   * 1012 Service Restart: this replica left and handed the stream to another; not an end (1001),
   * so clients reconnect (legacy-clients.md) and land on a replica that serves it.
   */
  replicaLeaving: { code: 1012, reason: 'service_restart' },
} as const satisfies Record<string, LegacyClose>;

/** 1001 Going Away: the stream ended, the reason says why. */
export const endClose = (reason: string): LegacyClose => ({ code: 1001, reason });

/** 1013 Try Again Later with a sunset refusal's reason: not the 1008 of a bad key. */
export const tryLaterClose = (reason: string): LegacyClose => ({ code: 1013, reason });

export type LegacyEndReasons = ReturnType<typeof legacyEndReasons>;

/** End reason when the gateway loses the media transport of a webrtc or customer-room stream. */
export function transportLostReason(transport: Exclude<Transport, 'native'>, brand: Brand): string {
  return transport === 'webrtc' ? 'webrtc_disconnected' : brand.roomDisconnected;
}

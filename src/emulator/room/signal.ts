/**
 * Wire helpers for LiveKit's signalling: binary protobuf `SignalRequest` ↑ / `SignalResponse` ↓
 * over a WebSocket, the `/rtc/v1` wrapped join request, session ids and ICE candidate JSON.
 */
import { randomBytes } from 'node:crypto';
import { gunzipSync } from 'node:zlib';
import {
  JoinRequest,
  ParticipantInfo,
  ParticipantInfo_Kind,
  SignalRequest,
  SignalResponse,
  WrappedJoinRequest,
  WrappedJoinRequest_Compression,
  protoInt64,
} from '@livekit/protocol';
import type { ParticipantInfo_State, SessionDescription, TrackInfo } from '@livekit/protocol';

/** Reported to clients; livekit-client refuses versions it does not know. */
export const SERVER_VERSION = '1.9.0';
export const SERVER_PROTOCOL = 16;

/** `/rtc` (v0: publisher + subscriber peer connections) or `/rtc/v1` (one peer connection). */
export type SignalPath = 'v0' | 'v1';

export type ResponseMessage = NonNullable<ConstructorParameters<typeof SignalResponse>[0]>['message'];
export type RequestMessage = SignalRequest['message'];

/** Upper bound for an inflated join request: an offer with a few dozen m-lines fits easily. */
const MAX_JOIN_REQUEST_BYTES = 1 << 20;

/** The parts of a join the room acts on, from v0 query parameters or the v1 `JoinRequest`. */
export interface JoinParams {
  path: SignalPath;
  autoSubscribe: boolean;
  reconnect: boolean;
  publisherOffer?: SessionDescription;
}

const SID_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

/** Server-issued ids: clients check the `PA_`/`RM_`/`TR_` prefixes (rtc-node panics without). */
export function newSid(prefix: 'PA_' | 'RM_' | 'TR_'): string {
  const bytes = randomBytes(12);
  let out = prefix;
  for (const b of bytes) out += SID_ALPHABET[b % SID_ALPHABET.length];
  return out;
}

/** `join_request`: base64url `WrappedJoinRequest`, its bytes possibly gzip-compressed. */
export function decodeJoinRequest(base64url: string): JoinRequest {
  const wrapped = WrappedJoinRequest.fromBinary(Buffer.from(base64url, 'base64url'));
  const bytes =
    wrapped.compression === WrappedJoinRequest_Compression.GZIP
      ? gunzipSync(wrapped.joinRequest, { maxOutputLength: MAX_JOIN_REQUEST_BYTES })
      : wrapped.joinRequest;
  return JoinRequest.fromBinary(new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength));
}

/** Reads the join parameters of either path; throws on an undecodable `join_request`. */
export function parseJoinParams(url: URL, path: SignalPath): JoinParams {
  if (path === 'v0') {
    return {
      path,
      autoSubscribe: url.searchParams.get('auto_subscribe') !== '0',
      reconnect: url.searchParams.get('reconnect') === '1',
    };
  }
  const raw = url.searchParams.get('join_request');
  if (!raw) {
    // Clients always send one on v1; treat its absence like a v0-style query.
    return { path, autoSubscribe: url.searchParams.get('auto_subscribe') !== '0', reconnect: false };
  }
  const join = decodeJoinRequest(raw);
  return {
    path,
    autoSubscribe: join.connectionSettings?.autoSubscribe ?? true,
    reconnect: join.reconnect,
    publisherOffer: join.publisherOffer,
  };
}

export function encodeResponse(message: ResponseMessage): Uint8Array {
  return new SignalResponse({ message }).toBinary();
}

/** Decodes one WebSocket frame (binary protobuf, or the JSON form some clients can send). */
export function decodeRequest(data: Buffer, isBinary: boolean): RequestMessage {
  const request = isBinary
    ? SignalRequest.fromBinary(new Uint8Array(data.buffer, data.byteOffset, data.byteLength))
    : SignalRequest.fromJsonString(data.toString('utf8'), { ignoreUnknownFields: true });
  return request.message;
}

/** A client candidate (`candidateInit` JSON); undefined for end-of-candidates or garbage. */
export function parseCandidate(json: string): RTCIceCandidateInit | undefined {
  try {
    const value: unknown = JSON.parse(json);
    if (typeof value !== 'object' || value === null) return undefined;
    const c = value as { candidate?: unknown; sdpMid?: unknown; sdpMLineIndex?: unknown };
    if (typeof c.candidate !== 'string' || c.candidate === '') return undefined;
    return {
      candidate: c.candidate,
      sdpMid: typeof c.sdpMid === 'string' ? c.sdpMid : null,
      sdpMLineIndex: typeof c.sdpMLineIndex === 'number' ? c.sdpMLineIndex : null,
    };
  } catch {
    return undefined;
  }
}

/**
 * A server candidate as strict JSON `{candidate, sdpMid, sdpMLineIndex}`. rtc-node panics on a
 * null `sdpMid` or an end-of-candidates message, so those are filled in or dropped.
 */
export function candidateToJson(candidate: RTCIceCandidate | null, fallbackMid: string): string | undefined {
  if (!candidate || !candidate.candidate) return undefined;
  return JSON.stringify({
    candidate: candidate.candidate,
    sdpMid: candidate.sdpMid ?? fallbackMid,
    sdpMLineIndex: candidate.sdpMLineIndex ?? 0,
  });
}

/** A participant as others see it (join responses, participant updates); `isPublisher` follows its tracks. */
export function participantInfo(p: {
  sid: string;
  identity: string;
  name: string;
  state: ParticipantInfo_State;
  version: number;
  joinedAtMs: number;
  tracks: TrackInfo[];
  canPublish: boolean;
  canSubscribe: boolean;
}): ParticipantInfo {
  return new ParticipantInfo({
    sid: p.sid,
    identity: p.identity,
    name: p.name,
    state: p.state,
    version: p.version,
    joinedAt: protoInt64.parse(Math.floor(p.joinedAtMs / 1000)),
    joinedAtMs: protoInt64.parse(p.joinedAtMs),
    tracks: p.tracks,
    permission: { canPublish: p.canPublish, canSubscribe: p.canSubscribe, canPublishData: false },
    isPublisher: p.tracks.length > 0,
    kind: ParticipantInfo_Kind.STANDARD,
  });
}

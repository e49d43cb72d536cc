/**
 * What an SDP offer or answer carries, read as text (no WebRTC library): the video sections, their
 * codecs and direction. The gateway reads a legacy client's offer before anything is allocated for
 * it; the emulator's room reads a WHIP offer to say plainly which codecs it cannot decode; the
 * conformance kit offers a synthetic publisher to a room.
 */
import { randomBytes } from 'node:crypto';

/** Payload types that carry no picture of their own. */
const AUXILIARY_CODECS = new Set(['RTX', 'RED', 'ULPFEC', 'FLEXFEC-03', 'FLEXFEC']);

export interface OfferedVideo {
  /** Media codecs in offer order (upper case, auxiliary ones left out; `AV1X` read as `AV1`). */
  codecs: string[];
  /** The client sends on this section (port not 0, direction sendrecv or sendonly). */
  sending: boolean;
  /** The section was accepted (port not 0): what an answer's video sections say. */
  accepted: boolean;
}

/** The video sections of an SDP; null when the text is not an SDP at all. */
export function offeredVideo(sdp: string): OfferedVideo[] | null {
  const lines = sdp.split(/\r?\n/);
  if (!lines.some((l) => l.trim() === 'v=0')) return null;
  const out: OfferedVideo[] = [];
  let current: { codecs: string[]; direction: string; port: number } | null = null;
  const finish = () => {
    if (!current) return;
    const accepted = current.port !== 0;
    out.push({
      codecs: current.codecs,
      sending: accepted && (current.direction === 'sendrecv' || current.direction === 'sendonly'),
      accepted,
    });
    current = null;
  };
  for (const raw of lines) {
    const line = raw.trim();
    if (line.startsWith('m=')) {
      finish();
      const [kind, port] = line.slice(2).split(/\s+/);
      if (kind === 'video') current = { codecs: [], direction: 'sendrecv', port: Number(port) };
      continue;
    }
    if (!current) continue;
    const rtpmap = /^a=rtpmap:\d+\s+([^/\s]+)/.exec(line);
    if (rtpmap) {
      const upper = rtpmap[1]!.toUpperCase();
      const name = upper === 'AV1X' ? 'AV1' : upper;
      if (!AUXILIARY_CODECS.has(name) && !current.codecs.includes(name)) current.codecs.push(name);
    } else if (/^a=(sendrecv|sendonly|recvonly|inactive)$/.test(line)) {
      current.direction = line.slice(2);
    }
  }
  finish();
  return out;
}

/** Why this text cannot be a publisher's offer (not an SDP, no video, no video sent), or null. */
export function offerShapeProblem(sdp: string): string | null {
  const video = offeredVideo(sdp);
  if (video === null) return 'sdp is not an SDP offer';
  if (video.length === 0) return 'the offer has no video section';
  if (!video.some((v) => v.sending)) return 'the offer sends no video (its video sections are recvonly, inactive or rejected)';
  return null;
}

/** The codecs an offer sends its video in (sending sections only, offer order, each once). */
export function sentVideoCodecs(sdp: string): string[] {
  return [...new Set((offeredVideo(sdp) ?? []).filter((v) => v.sending).flatMap((v) => v.codecs))];
}

/** `A, B or C`. */
export function orList(items: readonly string[]): string {
  return items.length <= 1 ? (items[0] ?? '') : `${items.slice(0, -1).join(', ')} or ${items.at(-1)}`;
}

/**
 * Why an offer's video cannot be decoded by a receiver that decodes only `decodable`, or null. The
 * shape problems of `offerShapeProblem` come first.
 */
export function undecodableVideo(sdp: string, decodable: readonly string[], who = 'this service'): string | null {
  const shape = offerShapeProblem(sdp);
  if (shape) return shape;
  const sent = (offeredVideo(sdp) ?? []).filter((v) => v.sending);
  if (sent.some((v) => v.codecs.some((c) => decodable.includes(c)))) return null;
  return `the offer's video codecs (${sentVideoCodecs(sdp).join(', ') || 'none'}) cannot be decoded by ${who}; offer ${orList(decodable)}`;
}

/**
 * A publisher's offer with one sendonly VP8 video track and no candidates, made without a WebRTC
 * stack (random ICE credentials and DTLS fingerprint): enough for a room to parse, answer and wait
 * for connectivity checks that never come. The conformance kit offers it to check that a room takes
 * WHIP publishers, and deletes the session at once.
 */
export function syntheticOffer(opts: { trackId?: string; streamId?: string } = {}): string {
  const hex = (n: number) => randomBytes(n).toString('hex');
  const fingerprint = (randomBytes(32).toString('hex').toUpperCase().match(/../g) ?? []).join(':');
  const stream = opts.streamId ?? `stream-${hex(4)}`;
  const track = opts.trackId ?? `video-${hex(4)}`;
  return [
    'v=0',
    `o=- ${BigInt(`0x${hex(6)}`)} 2 IN IP4 127.0.0.1`,
    's=-',
    't=0 0',
    'a=group:BUNDLE 0',
    `a=msid-semantic: WMS ${stream}`,
    'm=video 9 UDP/TLS/RTP/SAVPF 96',
    'c=IN IP4 0.0.0.0',
    'a=rtcp:9 IN IP4 0.0.0.0',
    `a=ice-ufrag:${hex(4)}`,
    `a=ice-pwd:${hex(12)}`,
    'a=ice-options:trickle',
    `a=fingerprint:sha-256 ${fingerprint}`,
    'a=setup:actpass',
    'a=mid:0',
    'a=sendonly',
    `a=msid:${stream} ${track}`,
    'a=rtcp-mux',
    'a=rtcp-rsize',
    'a=rtpmap:96 VP8/90000',
    'a=rtcp-fb:96 nack',
    'a=rtcp-fb:96 nack pli',
    `a=ssrc:${randomBytes(4).readUInt32BE(0)} cname:${hex(8)}`,
    '',
  ].join('\r\n');
}

/**
 * What a legacy client's SDP offer carries, read before anything is allocated for it. wrtc
 * (libwebrtc M106 as built) decodes VP8, VP9 and AV1, not H264: an offer whose video can only be
 * H264 gets a clear 422 instead of an answer that rejects the video section.
 */

export const DECODABLE_VIDEO_CODECS: readonly string[] = ['VP8', 'VP9', 'AV1'];

/** Payload types that carry no picture of their own. */
const AUXILIARY_CODECS = new Set(['RTX', 'RED', 'ULPFEC', 'FLEXFEC-03', 'FLEXFEC']);

export interface OfferedVideo {
  /** Media codecs in offer order (upper case, auxiliary ones left out). */
  codecs: string[];
  /** The client sends on this section (port not 0, direction sendrecv or sendonly). */
  sending: boolean;
}

/** The video sections of an SDP; null when the text is not an SDP at all. */
export function offeredVideo(sdp: string): OfferedVideo[] | null {
  const lines = sdp.split(/\r?\n/);
  if (!lines.some((l) => l.trim() === 'v=0')) return null;
  const out: OfferedVideo[] = [];
  let current: (OfferedVideo & { direction: string; port: number }) | null = null;
  const finish = () => {
    if (!current) return;
    out.push({
      codecs: current.codecs,
      sending: current.port !== 0 && (current.direction === 'sendrecv' || current.direction === 'sendonly'),
    });
    current = null;
  };
  for (const raw of lines) {
    const line = raw.trim();
    if (line.startsWith('m=')) {
      finish();
      const [kind, port] = line.slice(2).split(/\s+/);
      if (kind === 'video') current = { codecs: [], sending: false, direction: 'sendrecv', port: Number(port) };
      continue;
    }
    if (!current) continue;
    const rtpmap = /^a=rtpmap:\d+\s+([^/\s]+)/.exec(line);
    if (rtpmap) {
      const name = rtpmap[1]!.toUpperCase();
      if (!AUXILIARY_CODECS.has(name) && !current.codecs.includes(name)) current.codecs.push(name);
    } else if (/^a=(sendrecv|sendonly|recvonly|inactive)$/.test(line)) {
      current.direction = line.slice(2);
    }
  }
  finish();
  return out;
}

const isDecodable = (codec: string) => DECODABLE_VIDEO_CODECS.includes(codec === 'AV1X' ? 'AV1' : codec);

/** Why this offer cannot feed a stream, or null when it can. */
export function offerProblem(sdp: string): string | null {
  const video = offeredVideo(sdp);
  if (video === null) return 'sdp is not an SDP offer';
  if (video.length === 0) return 'the offer has no video section';
  const sending = video.filter((v) => v.sending);
  if (sending.length === 0) return 'the offer sends no video (its video sections are recvonly, inactive or rejected)';
  if (sending.some((v) => v.codecs.some(isDecodable))) return null;
  const offered = [...new Set(sending.flatMap((v) => v.codecs))];
  return (
    `the offer's video codecs (${offered.join(', ') || 'none'}) cannot be decoded by this service; ` +
    `offer ${DECODABLE_VIDEO_CODECS.slice(0, -1).join(', ')} or ${DECODABLE_VIDEO_CODECS.at(-1)}`
  );
}

/**
 * What the relay can take of a legacy client's offer, read before anything is allocated for it.
 * wrtc (libwebrtc M106 as built) decodes VP8, VP9 and AV1, not H264: in relay mode an offer whose
 * video can only be H264 gets a clear 422 instead of an answer that rejects the video section. Over
 * WHIP the upstream's room decides what it takes (only the offer's shape is checked here).
 */
import { undecodableVideo } from '../../lib/sdp';

export const DECODABLE_VIDEO_CODECS: readonly string[] = ['VP8', 'VP9', 'AV1'];

/** Why the relay cannot feed a stream from this offer, or null when it can. */
export function offerProblem(sdp: string): string | null {
  return undecodableVideo(sdp, DECODABLE_VIDEO_CODECS);
}

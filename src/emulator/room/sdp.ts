/**
 * SDP munging for simulcast. Both LiveKit SDKs publish VP8 simulcast (`q`, `h`, `f`) by default,
 * and libwebrtc M106 answers such an offer without `a=simulcast`, so only the first (lowest)
 * encoding arrives: 320×180 of a 720p capture. Adding `a=rid:<top> recv` and
 * `a=simulcast:recv <top>` to the sent answer makes the client send just its top layer, which wrtc
 * then receives as a plain stream (the local description is not changed).
 */

const CRLF = '\r\n';

export interface SimulcastSection {
  mid: string;
  /** Rids in the order of the offer's `a=simulcast:send` list (paused ones included). */
  rids: string[];
}

/** Splits an SDP into its session part and media sections (each starting with `m=`). */
function splitSections(sdp: string): string[] {
  return sdp.split(/\r\n(?=m=)/);
}

/** The m-sections of an offer that send simulcast. */
export function offeredSimulcast(offerSdp: string): SimulcastSection[] {
  const found: SimulcastSection[] = [];
  for (const section of splitSections(offerSdp).slice(1)) {
    const mid = /^a=mid:(\S+)/m.exec(section)?.[1];
    const list = /^a=simulcast:send (\S+)/m.exec(section)?.[1];
    if (!mid || !list) continue;
    // "q;h;f", alternatives "q,x;h", paused "~q"
    const rids = list
      .split(';')
      .map((group) => group.split(',')[0].replace(/^~/, ''))
      .filter(Boolean);
    if (rids.length > 0) found.push({ mid, rids });
  }
  return found;
}

/** LiveKit names its full-resolution layer `f`; otherwise the last rid listed is the top one. */
export function topLayerRid(rids: string[]): string {
  return rids.includes('f') ? 'f' : rids[rids.length - 1];
}

/**
 * Adds receive-only acceptance of each simulcast section's top layer to the answer. Sections the
 * answer rejected (port 0) or that already carry `a=simulcast` are left alone.
 */
export function acceptTopSimulcastLayer(offerSdp: string, answerSdp: string): { sdp: string; accepted: { mid: string; rid: string }[] } {
  const wanted = new Map(offeredSimulcast(offerSdp).map((s) => [s.mid, topLayerRid(s.rids)]));
  if (wanted.size === 0) return { sdp: answerSdp, accepted: [] };
  const accepted: { mid: string; rid: string }[] = [];
  const sections = splitSections(answerSdp).map((section, index) => {
    if (index === 0) return section;
    const mid = /^a=mid:(\S+)/m.exec(section)?.[1];
    const rid = mid === undefined ? undefined : wanted.get(mid);
    if (mid === undefined || rid === undefined) return section;
    if (/^m=\S+ 0 /.test(section) || /^a=simulcast:/m.test(section)) return section;
    accepted.push({ mid, rid });
    const body = section.endsWith(CRLF) ? section.slice(0, -CRLF.length) : section;
    return `${body}${CRLF}a=rid:${rid} recv${CRLF}a=simulcast:recv ${rid}${section.endsWith(CRLF) ? CRLF : ''}`;
  });
  return { sdp: sections.join(CRLF), accepted };
}

/**
 * The bitrate a publisher's encoder starts at. The publishing client reads
 * `x-google-start-bitrate` from the answer's video fmtp; without it, its bandwidth estimate starts
 * low and climbs over 10–15 s, so a 720p capture arrives as 320×180 … 960×540 meanwhile. On
 * loopback there is no reason to start low.
 */
export const START_BITRATE_KBPS = 2500;

const VIDEO_CODECS = /^a=rtpmap:(\d+) (VP8|VP9|AV1|H264)\/90000/gm;

/** Adds `x-google-start-bitrate` to the fmtp of every video codec (not RTX/RED/FEC) of an SDP. */
export function withStartBitrate(sdp: string, kbps: number): string {
  return splitSections(sdp)
    .map((section) => {
      if (!section.startsWith('m=video') || section.includes('x-google-start-bitrate')) return section;
      let out = section;
      for (const [, pt] of section.matchAll(VIDEO_CODECS)) {
        const fmtp = new RegExp(`^a=fmtp:${pt} (.*)$`, 'm');
        out = fmtp.test(out)
          ? out.replace(fmtp, (_line, params: string) => `a=fmtp:${pt} ${params};x-google-start-bitrate=${kbps}`)
          : out.replace(new RegExp(`^(a=rtpmap:${pt} .*)$`, 'm'), `$1${CRLF}a=fmtp:${pt} x-google-start-bitrate=${kbps}`);
      }
      return out;
    })
    .join(CRLF);
}

/** The mids of an SDP in order (for a candidate whose `sdpMid` is missing). */
export function mids(sdp: string): string[] {
  return [...sdp.matchAll(/^a=mid:(\S+)/gm)].map((m) => m[1]);
}

/**
 * Page script for the legacy media tests: what the legacy browser SDKs do, driven by the test
 * through `window.legacyTest`. Bundled with esbuild at test time.
 * - native: POST /v0.2/streams, then publish the (fake) camera into the returned room with
 *   livekit-client;
 * - webrtc: offer the camera with RTCPeerConnection (no ICE servers, sent before gathering ends,
 *   as the SDKs do), POST it as `source` or as the deprecated top-level `webrtc`, apply the answer;
 *   stall the video or close the peer connection.
 */
import { LogLevel, Room, setLogLevel } from 'livekit-client';

export interface CreateResult {
  status: number;
  body: Record<string, any>;
}

declare global {
  interface Window {
    legacyTest: {
      createNative(gateway: string, key: string, body: object): Promise<CreateResult>;
      publish(url: string, token: string): Promise<void>;
      createWebrtc(
        gateway: string,
        key: string,
        body: object,
        opts: { deprecatedField: boolean; mungeOffer?: 'h264-only' },
      ): Promise<CreateResult>;
      peerState(): string | undefined;
      /** Video frames the peer connection has sent so far (its outbound-rtp stats). */
      framesSent(): Promise<number>;
      /** Sends no video for `ms` (the sender's track removed, the connection kept), then sends again. */
      stall(ms: number): Promise<void>;
      closePeer(): void;
      leave(): Promise<void>;
    };
  }
}

let room: Room | undefined;
let pc: RTCPeerConnection | undefined;

async function post(gateway: string, key: string, body: object): Promise<CreateResult> {
  const res = await fetch(`${gateway}/v0.2/streams`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, any> };
}

/** Keeps only the H264 payload types (and their RTX) of the video section: an offer wrtc cannot decode. */
function h264Only(sdp: string): string {
  const lines = sdp.split('\r\n');
  const h264 = new Set(lines.map((l) => /^a=rtpmap:(\d+) H264\//.exec(l)?.[1]).filter((pt): pt is string => !!pt));
  for (const l of lines) {
    const m = /^a=fmtp:(\d+) apt=(\d+)/.exec(l);
    if (m && h264.has(m[2]!)) h264.add(m[1]!);
  }
  let inVideo = false;
  const out: string[] = [];
  for (const l of lines) {
    if (l.startsWith('m=')) inVideo = l.startsWith('m=video');
    if (inVideo && l.startsWith('m=video')) {
      const [m, port, proto] = l.split(' ');
      out.push([m, port, proto, ...h264].join(' '));
      continue;
    }
    const pt = /^a=(?:rtpmap|fmtp|rtcp-fb):(\d+)/.exec(l)?.[1];
    if (inVideo && pt && !h264.has(pt)) continue;
    out.push(l);
  }
  return out.join('\r\n');
}

window.legacyTest = {
  createNative: post,
  async publish(url, token) {
    setLogLevel(LogLevel.warn);
    room = new Room({ adaptiveStream: false, dynacast: false });
    await room.connect(url, token, { rtcConfig: { iceServers: [] } });
    await room.localParticipant.setCameraEnabled(true, { resolution: { width: 640, height: 480 } }, { simulcast: false });
  },
  async createWebrtc(gateway, key, body, opts) {
    const media = await navigator.mediaDevices.getUserMedia({ video: { width: 640, height: 480 } });
    pc = new RTCPeerConnection({ iceServers: [] });
    for (const track of media.getVideoTracks()) pc.addTrack(track, media);
    const offer = await pc.createOffer();
    await pc.setLocalDescription(offer);
    let sdp = pc.localDescription!.sdp;
    if (opts.mungeOffer === 'h264-only') sdp = h264Only(sdp);
    const source = opts.deprecatedField ? { webrtc: { type: 'offer', sdp } } : { source: { type: 'webrtc', sdp } };
    const result = await post(gateway, key, { ...body, ...source });
    if (result.status === 201) await pc.setRemoteDescription(result.body.webrtc as RTCSessionDescriptionInit);
    return result;
  },
  peerState: () => pc?.connectionState,
  async framesSent() {
    let sent = 0;
    (await pc?.getStats())?.forEach((s: Record<string, unknown>) => {
      if (s.type === 'outbound-rtp' && s.kind === 'video') sent += Number(s.framesSent ?? 0);
    });
    return sent;
  },
  async stall(ms) {
    const sender = pc?.getSenders().find((s) => s.track?.kind === 'video');
    if (!sender) throw new Error('no video sender');
    const track = sender.track;
    await sender.replaceTrack(null);
    await new Promise((r) => setTimeout(r, ms));
    await sender.replaceTrack(track);
  },
  closePeer() {
    pc?.close();
  },
  async leave() {
    await room?.disconnect();
  },
};

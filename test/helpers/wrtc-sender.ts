/**
 * A legacy webrtc client without a browser: `@roamhq/wrtc` offers one video track fed with small
 * I420 frames whose brightness changes each frame, at a fixed rate. Light enough for tens of
 * streams in one process (the `rolling` bench, fleet tests). Offers with every candidate gathered
 * (loopback only, no ICE servers). A process that created wrtc video objects may segfault on a
 * natural exit: benches end with `process.exit()`, tests run in ./test/media-environment.js.
 */
import { RTCPeerConnection, nonstandard } from '@roamhq/wrtc';

export interface WebrtcSenderOptions {
  width?: number;
  height?: number;
  fps?: number;
}

export interface WebrtcSender {
  /** The SDP offer to POST (`source: {type: 'webrtc', sdp}`). */
  offer: string;
  /** Applies the create response's answer. */
  answer(sdp: string): Promise<void>;
  readonly connectionState: string;
  /** Stops the frames and closes the peer connection (what closing a page does). */
  close(): void;
}

export async function startWebrtcSender(opts: WebrtcSenderOptions = {}): Promise<WebrtcSender> {
  const width = opts.width ?? 160;
  const height = opts.height ?? 120;
  const fps = opts.fps ?? 5;
  const source = new nonstandard.RTCVideoSource();
  const track = source.createTrack();
  const pc = new RTCPeerConnection({ iceServers: [] });
  pc.addTrack(track);
  const data = new Uint8Array((width * height * 3) / 2);
  let n = 0;
  const timer = setInterval(() => {
    // Luma steps each frame (the encoder sends real frames, not skips); chroma stays neutral.
    data.fill(((n++ * 7) % 200) + 20, 0, width * height);
    data.fill(128, width * height);
    source.onFrame({ width, height, data });
  }, 1000 / fps);
  let closed = false;
  const close = () => {
    if (closed) return;
    closed = true;
    clearInterval(timer);
    track.stop();
    pc.close();
  };
  try {
    await pc.setLocalDescription(await pc.createOffer());
    await new Promise<void>((resolve) => {
      if (pc.iceGatheringState === 'complete') return resolve();
      const t = setTimeout(resolve, 2000);
      pc.onicegatheringstatechange = () => {
        if (pc.iceGatheringState !== 'complete') return;
        clearTimeout(t);
        resolve();
      };
    });
  } catch (err) {
    close();
    throw err;
  }
  return {
    offer: pc.localDescription!.sdp,
    answer: (sdp) => pc.setRemoteDescription({ type: 'answer', sdp }),
    get connectionState() {
      return pc.connectionState;
    },
    close,
  };
}

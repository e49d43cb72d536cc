/**
 * The two native media stacks, loaded on first use only: a gateway that never relays media never
 * loads them (rtc-node's FFI keeps a process alive until `dispose()`; a process that created wrtc
 * video objects can segfault on a natural exit).
 */
import type * as Rtc from '@livekit/rtc-node';

export type RtcModule = typeof Rtc;

/** A decoded picture as wrtc hands it out: planar I420. */
export interface I420Frame {
  width: number;
  height: number;
  data: Uint8Array;
}

/** wrtc's nonstandard sink: every decoded frame of a received track. */
export interface WrtcVideoSink {
  onframe: ((event: { frame: I420Frame }) => void) | null;
  stop(): void;
}

export interface WrtcModule {
  RTCPeerConnection: typeof RTCPeerConnection;
  createVideoSink(track: MediaStreamTrack): WrtcVideoSink;
}

export async function loadRtc(): Promise<RtcModule> {
  return import('@livekit/rtc-node');
}

export async function loadWrtc(): Promise<WrtcModule> {
  const wrtc = await import('@roamhq/wrtc');
  return {
    RTCPeerConnection: wrtc.RTCPeerConnection as unknown as typeof RTCPeerConnection,
    createVideoSink: (track) => new wrtc.nonstandard.RTCVideoSink(track as never) as unknown as WrtcVideoSink,
  };
}

/**
 * The slice of `@roamhq/wrtc` (libwebrtc M106) the room uses, with the nonstandard parts typed.
 * Loading the module is harmless; creating video objects makes a natural process exit segfault
 * (see README: processes that use the room end with an explicit `process.exit()`).
 */
import { MediaStream, RTCPeerConnection, nonstandard } from '@roamhq/wrtc';

export { RTCPeerConnection };

/** A decoded frame as wrtc hands it out and takes it in: planar I420. */
export interface I420Frame {
  width: number;
  height: number;
  data: Uint8Array;
}

export interface VideoSink {
  onframe: ((event: { frame: I420Frame }) => void) | null;
  stop(): void;
}

export interface VideoSource {
  createTrack(): MediaStreamTrack;
  onFrame(frame: I420Frame): void;
}

/** Decodes a received video track into I420 frames. */
export function createVideoSink(track: MediaStreamTrack): VideoSink {
  return new nonstandard.RTCVideoSink(track) as unknown as VideoSink;
}

/** A source whose tracks carry frames pushed with `onFrame` (re-encoded per peer connection). */
export function createVideoSource(): VideoSource {
  return new nonstandard.RTCVideoSource() as unknown as VideoSource;
}

/**
 * A stream with a chosen id. LiveKit clients read `<participant sid>|<track sid>` from the stream
 * id (msid) of a received track to find its publication; wrtc accepts `{id}` (the DOM type does not).
 */
export function createMediaStream(id: string): MediaStream {
  const Ctor = MediaStream as unknown as new (init: { id: string }) => MediaStream;
  return new Ctor({ id });
}

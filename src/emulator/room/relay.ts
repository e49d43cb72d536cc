import { createVideoSink, createVideoSource } from './wrtc';
import type { I420Frame, VideoSink, VideoSource } from './wrtc';

/**
 * One video publication's frames on their way to subscribers: each subscriber connection gets its
 * own track of a shared re-sourced video and encodes it on its own. Re-sourcing (rather than adding
 * the remote track to other connections) keeps the subscriber side independent of the publisher
 * connection's lifetime, and lets server-made frames (`push`) reach subscribers the same way.
 */
export class VideoRelay {
  private source: VideoSource | undefined;
  private readonly tracks = new Set<MediaStreamTrack>();
  private stopped = false;

  private constructor(private readonly sink?: VideoSink) {}

  /** A received track, decoded once: every frame goes to `onFrame` (the stream's buffer), then to subscribers. */
  static decoding(track: MediaStreamTrack, onFrame: (frame: I420Frame) => void, onError: (err: unknown) => void): VideoRelay {
    const relay = new VideoRelay(createVideoSink(track));
    relay.sink!.onframe = ({ frame }) => {
      if (relay.stopped) return;
      try {
        onFrame(frame);
      } catch (err) {
        onError(err);
      }
      relay.push(frame);
    };
    return relay;
  }

  /** Frames the server makes itself, handed in with `push`. */
  static pushed(): VideoRelay {
    return new VideoRelay();
  }

  /** Hands a frame to the subscribers (dropped while there are none). */
  push(frame: I420Frame): void {
    if (!this.stopped && this.source && this.tracks.size > 0) this.source.onFrame(frame);
  }

  /** Whether a subscriber receives this video now. */
  get watched(): boolean {
    return !this.stopped && this.tracks.size > 0;
  }

  /** A new track carrying this relay's frames, for one subscriber connection. */
  createTrack(): MediaStreamTrack {
    if (this.stopped) throw new Error('relay stopped');
    this.source ??= createVideoSource();
    const track = this.source.createTrack();
    this.tracks.add(track);
    return track;
  }

  releaseTrack(track: MediaStreamTrack): void {
    if (this.tracks.delete(track)) track.stop();
  }

  get subscriberTracks(): number {
    return this.tracks.size;
  }

  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    if (this.sink) {
      this.sink.onframe = null;
      this.sink.stop();
    }
    for (const track of this.tracks) track.stop();
    this.tracks.clear();
  }
}

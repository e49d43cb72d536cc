import { createVideoSink, createVideoSource } from './wrtc';
import type { I420Frame, VideoSink, VideoSource } from './wrtc';

/**
 * One received video track, decoded once: every frame goes to `onFrame` (the stream's buffer) and,
 * once a subscriber needs it, into a re-sourced track that each subscriber connection encodes
 * on its own. Re-sourcing (rather than adding the remote track to other connections) keeps the
 * subscriber side independent of the publisher connection's lifetime.
 */
export class VideoRelay {
  private readonly sink: VideoSink;
  private source: VideoSource | undefined;
  private readonly tracks = new Set<MediaStreamTrack>();
  private stopped = false;

  constructor(
    track: MediaStreamTrack,
    private readonly onFrame: (frame: I420Frame) => void,
    private readonly onError: (err: unknown) => void,
  ) {
    this.sink = createVideoSink(track);
    this.sink.onframe = ({ frame }) => this.forward(frame);
  }

  private forward(frame: I420Frame): void {
    if (this.stopped) return;
    try {
      this.onFrame(frame);
    } catch (err) {
      this.onError(err);
    }
    if (this.source && this.tracks.size > 0) this.source.onFrame(frame);
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
    this.sink.onframe = null;
    this.sink.stop();
    for (const track of this.tracks) track.stop();
    this.tracks.clear();
  }
}

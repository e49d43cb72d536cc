/**
 * A customer's camera in a media room: an `@livekit/rtc-node` participant publishing the
 * emulator's index pattern (each frame's pixels carry its index) from `first`, at 10 fps. Loads
 * rtc-node: its suite runs in ./test/media-environment.js.
 */
import * as rtc from '@livekit/rtc-node';
import { PatternRenderer } from '../../src/emulator/frames/pattern';

/** A customer's camera: an rtc-node participant painting pattern indices from `first` at 10 fps. */
export class PatternCamera {
  readonly room = new rtc.Room();
  next: number;
  private readonly renderer = new PatternRenderer(320, 240);
  private source: rtc.VideoSource | undefined;
  private timer: NodeJS.Timeout | undefined;

  constructor(first = 0) {
    this.next = first;
  }

  async start(url: string, token: string): Promise<void> {
    await this.room.connect(url, token, { autoSubscribe: false, dynacast: false });
    this.source = new rtc.VideoSource(320, 240);
    const track = rtc.LocalVideoTrack.createVideoTrack('camera', this.source);
    await this.room.localParticipant!.publishTrack(
      track,
      new rtc.TrackPublishOptions({ source: rtc.TrackSource.SOURCE_CAMERA, simulcast: false }),
    );
    this.timer = setInterval(() => {
      const data = this.renderer.renderI420(this.next++);
      this.source?.captureFrame(new rtc.VideoFrame(data, 320, 240, rtc.VideoBufferType.I420));
    }, 100);
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.room.disconnect().catch(() => undefined);
    await this.source?.close().catch(() => undefined);
  }
}

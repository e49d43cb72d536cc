/**
 * Page script for room tests: livekit-client publishing the (fake) camera or subscribing, driven
 * by the test through `window.roomTest`. Bundled with esbuild at test time.
 */
import { LogLevel, Room, RoomEvent, Track, setLogLevel } from 'livekit-client';
import type { RemoteTrack } from 'livekit-client';

export interface PublishOptions {
  width: number;
  height: number;
  simulcast: boolean;
}

export interface PublishResult {
  connectMs: number;
  publishMs: number;
  trackSid: string | undefined;
  serverVersion: string | undefined;
}

/** One frame of the received video as drawn on a canvas: packed RGB, base64. */
export interface Snapshot {
  width: number;
  height: number;
  rgb: string;
}

export interface ReceivedVideo {
  trackSid: string;
  participantIdentity: string;
  frames: number;
  width: number;
  height: number;
}

declare global {
  interface Window {
    roomTest: {
      publish(url: string, token: string, opts: PublishOptions): Promise<PublishResult>;
      subscribe(url: string, token: string): Promise<void>;
      received(): ReceivedVideo | undefined;
      snapshot(): Snapshot | undefined;
      /** Tries to publish the camera in the joined room: 'published' or the error's message. */
      tryPublishCamera(): Promise<string>;
      events(): string[];
      leave(): Promise<void>;
    };
  }
}

let room: Room | undefined;
let video: HTMLVideoElement | undefined;
let received: Omit<ReceivedVideo, 'frames' | 'width' | 'height'> | undefined;
const events: string[] = [];

function newRoom(): Room {
  setLogLevel(LogLevel.warn);
  const r = new Room({ adaptiveStream: false, dynacast: false });
  r.on(RoomEvent.Reconnecting, () => events.push('reconnecting'));
  r.on(RoomEvent.SignalReconnecting, () => events.push('signalReconnecting'));
  r.on(RoomEvent.Disconnected, (reason) => events.push(`disconnected:${reason}`));
  r.on(RoomEvent.TrackSubscribed, (track: RemoteTrack, publication, participant) => {
    if (track.kind !== Track.Kind.Video) return;
    events.push(`subscribed:${publication.trackSid}`);
    received = { trackSid: publication.trackSid, participantIdentity: participant.identity };
    video = track.attach() as HTMLVideoElement;
    video.muted = true;
    document.body.appendChild(video);
  });
  room = r;
  return r;
}

window.roomTest = {
  async publish(url, token, opts) {
    const r = newRoom();
    const t0 = performance.now();
    // No ICE servers: nothing may leave the machine.
    await r.connect(url, token, { rtcConfig: { iceServers: [] } });
    const connectMs = performance.now() - t0;
    // The camera's default ('maintain-framerate') lowers the resolution when the encoder runs short
    // of CPU, as on a loaded machine: the size asked for is what the room should see.
    const publication = await r.localParticipant.setCameraEnabled(
      true,
      { resolution: { width: opts.width, height: opts.height } },
      { simulcast: opts.simulcast, degradationPreference: 'maintain-resolution' },
    );
    return {
      connectMs,
      publishMs: performance.now() - t0,
      trackSid: publication?.trackSid,
      serverVersion: r.serverInfo?.version,
    };
  },
  async subscribe(url, token) {
    await newRoom().connect(url, token, { rtcConfig: { iceServers: [] }, autoSubscribe: true });
  },
  received() {
    if (!received || !video) return undefined;
    return {
      ...received,
      frames: video.getVideoPlaybackQuality().totalVideoFrames,
      width: video.videoWidth,
      height: video.videoHeight,
    };
  },
  snapshot() {
    if (!video || video.videoWidth === 0) return undefined;
    const { videoWidth: width, videoHeight: height } = video;
    const canvas = document.createElement('canvas');
    canvas.width = width;
    canvas.height = height;
    const ctx = canvas.getContext('2d')!;
    ctx.drawImage(video, 0, 0, width, height);
    const rgba = ctx.getImageData(0, 0, width, height).data;
    let binary = '';
    for (let i = 0; i < rgba.length; i += 4) binary += String.fromCharCode(rgba[i]!, rgba[i + 1]!, rgba[i + 2]!);
    return { width, height, rgb: btoa(binary) };
  },
  async tryPublishCamera() {
    try {
      await room!.localParticipant.setCameraEnabled(true);
      return 'published';
    } catch (err) {
      return err instanceof Error ? err.message : String(err);
    }
  },
  events: () => events,
  async leave() {
    await room?.disconnect();
  },
};

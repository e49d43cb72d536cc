import { ParticipantInfo_State, TrackInfo, TrackSource, TrackType } from '@livekit/protocol';
import type { ParticipantInfo } from '@livekit/protocol';
import { newSid, participantInfo } from './signal';

/** Who a publication belongs to, as the room and its subscribers need it. */
export interface RoomPublisher {
  readonly sid: string;
  readonly identity: string;
  /** This publisher as others see it (ParticipantInfo; the version grows on every call). */
  info(): ParticipantInfo;
  /** A subscriber now receives `trackSid` (LiveKit's ↓ `trackSubscribed`). */
  trackSubscribed(trackSid: string): void;
}

export interface ServerVideoOptions {
  /** The participant identity subscribers see (distinct from any token's). */
  identity: string;
  name?: string;
  /** Size of the frames that will be pushed (announced in the TrackInfo). */
  width: number;
  height: number;
}

/** Server-made video handed to a room (see `MediaRoomServer.publishServerVideo`). */
export interface ServerVideo {
  /** Whether a subscriber receives the video now: make and push frames only then. */
  readonly watched: boolean;
  /** Planar I420 frame of the announced size (dropped while nobody watches). */
  push(frame: { width: number; height: number; data: Uint8Array }): void;
  /** Withdraws the video: its participant leaves the room. */
  stop(): void;
}

/**
 * The participant the server plays itself to publish server-made video (the stream's synthetic
 * test pattern) into a room: no signalling session, one video track while its publication is the
 * room's, and otherwise a participant like any other in join responses and updates.
 */
export class ServerPublisher implements RoomPublisher {
  readonly sid = newSid('PA_');
  readonly identity: string;
  private readonly name: string;
  private readonly width: number;
  private readonly height: number;
  private readonly joinedAtMs = Date.now();
  private version = 0;
  private state = ParticipantInfo_State.ACTIVE;
  /** Its track while that is the room's live publication. */
  private live: TrackInfo | undefined;

  constructor(opts: ServerVideoOptions) {
    this.identity = opts.identity;
    this.name = opts.name ?? opts.identity;
    this.width = opts.width;
    this.height = opts.height;
  }

  /** A new track (each publication its own sid, as when a client publishes again). */
  publish(): TrackInfo {
    this.live = new TrackInfo({
      sid: newSid('TR_'),
      type: TrackType.VIDEO,
      name: 'video',
      source: TrackSource.CAMERA,
      width: this.width,
      height: this.height,
      mimeType: 'video/VP8',
    });
    return this.live;
  }

  unpublish(): void {
    this.live = undefined;
  }

  leave(): void {
    this.live = undefined;
    this.state = ParticipantInfo_State.DISCONNECTED;
  }

  info(): ParticipantInfo {
    this.version += 1;
    const { sid, identity, name, state, version, joinedAtMs } = this;
    return participantInfo({
      sid,
      identity,
      name,
      state,
      version,
      joinedAtMs,
      tracks: this.live ? [this.live] : [],
      canPublish: true,
      canSubscribe: false,
    });
  }

  /** Nobody to tell: the server knows its subscribers. */
  trackSubscribed(): void {}
}

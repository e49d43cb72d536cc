import type { RemoteTrack, Room, VideoFrame, VideoFrameEvent } from '@livekit/rtc-node';
import type { Logger } from '../../lib/logger';
import type { RtcModule } from './natives';
import { joinRoom } from './publisher';

export interface RoomSourceOptions {
  rtc: RtcModule;
  /** The customer's room and subscribe token (checked beforehand: see room-token.ts). */
  url: string;
  token: string;
  logger: Logger;
  /** Every decoded frame of the followed track, in its native buffer type (convert only what you keep). */
  onFrame(frame: VideoFrame): void;
  /** The customer's room is gone (closed, this participant removed, or the connection lost for good). */
  onLost(why: string): void;
}

/** Raised when the customer's room cannot be joined (the caller answers 422). */
export class RoomJoinFailed extends Error {
  override name = 'RoomJoinFailed';
}

/**
 * The legacy customer-room transport: joins the customer's room as a subscriber with
 * `@livekit/rtc-node` and follows one video track: the first one subscribed, then, when that one
 * goes (unpublished, publisher left), another subscribed video track or the next one to arrive.
 */
export class RoomSource {
  private followed: { sid: string; reader: ReadableStreamDefaultReader<VideoFrameEvent> } | undefined;
  private closed = false;
  /** Losses count only once joined (a failed join is reported by `join` itself). */
  private joined = false;
  private lostReported = false;
  /** Frames received on followed tracks. */
  framesReceived = 0;
  /** Video tracks followed so far. */
  tracksFollowed = 0;

  private constructor(
    private readonly room: Room,
    private readonly opts: RoomSourceOptions,
  ) {}

  /** Joins the room; throws RoomJoinFailed when it cannot. */
  static async join(opts: RoomSourceOptions): Promise<RoomSource> {
    const { rtc } = opts;
    const room = new rtc.Room();
    const source = new RoomSource(room, opts);
    room.on(rtc.RoomEvent.TrackSubscribed, (track) => source.onSubscribed(track));
    room.on(rtc.RoomEvent.TrackUnsubscribed, (_track, publication) => source.onUnsubscribed(publication.sid));
    room.on(rtc.RoomEvent.Disconnected, (reason) => source.lost(`left the room (${rtc.DisconnectReason[reason] ?? reason})`));
    try {
      await joinRoom(room, opts.url, opts.token, { autoSubscribe: true });
    } catch (err) {
      source.closed = true;
      throw new RoomJoinFailed(`could not join the room: ${(err as Error).message}`);
    }
    source.joined = true;
    if (!room.isConnected) {
      source.lost('left the room while joining');
    }
    // Tracks already published were subscribed during the join.
    source.followAnother();
    return source;
  }

  get followedTrackSid(): string | undefined {
    return this.followed?.sid;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.unfollow();
    await this.room.disconnect().catch((err: unknown) => this.opts.logger.debug({ err }, 'customer room disconnect failed'));
  }

  private onSubscribed(track: RemoteTrack): void {
    if (this.closed || this.followed || track.kind !== this.opts.rtc.TrackKind.KIND_VIDEO || !track.sid) return;
    this.follow(track);
  }

  private onUnsubscribed(sid: string | undefined): void {
    if (this.closed || !this.followed || sid !== this.followed.sid) return;
    this.unfollow();
    this.followAnother();
  }

  /** Follows any subscribed video track (after the followed one went, or after the join). */
  private followAnother(): void {
    if (this.closed || this.followed) return;
    for (const participant of this.room.remoteParticipants.values()) {
      for (const publication of participant.trackPublications.values()) {
        const track = publication.track;
        if (track && track.kind === this.opts.rtc.TrackKind.KIND_VIDEO && track.sid) {
          this.follow(track);
          return;
        }
      }
    }
  }

  private follow(track: RemoteTrack): void {
    const reader = new this.opts.rtc.VideoStream(track).getReader();
    this.followed = { sid: track.sid!, reader };
    this.tracksFollowed += 1;
    this.opts.logger.debug({ track: track.sid }, 'following customer video track');
    void this.pump(reader);
  }

  private unfollow(): void {
    const reader = this.followed?.reader;
    this.followed = undefined;
    void reader?.cancel().catch(() => undefined);
  }

  /** Reads every frame (an unread stream would queue them), handing each on while followed. */
  private async pump(reader: ReadableStreamDefaultReader<VideoFrameEvent>): Promise<void> {
    for (;;) {
      const next = await reader.read().catch(() => ({ done: true as const, value: undefined }));
      if (next.done || !next.value || this.closed || this.followed?.reader !== reader) return;
      this.framesReceived += 1;
      this.opts.onFrame(next.value.frame);
    }
  }

  private lost(why: string): void {
    if (this.closed || !this.joined || this.lostReported) return;
    this.lostReported = true;
    this.unfollow();
    this.opts.onLost(why);
  }
}

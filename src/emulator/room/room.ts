import { DisconnectReason } from '@livekit/protocol';
import type { ParticipantInfo, Room as RoomProto, TrackInfo } from '@livekit/protocol';
import type { RawFrame } from '../frames/types';
import type { Logger } from '../../lib/logger';
import { VideoRelay } from './relay';
import { ServerPublisher } from './server-video';
import type { RoomPublisher, ServerVideoOptions } from './server-video';
import { newSid } from './signal';
import type { RoomFrameSink, RoomStats } from './types';

/**
 * A participant of a room: a signalling session (./participant.ts) or a WHIP publisher
 * (./whip-participant.ts). What the room asks of each.
 */
export interface RoomMember extends RoomPublisher {
  readonly canSubscribe: boolean;
  /** Ends it (idempotent); with a `reason`, a signalling client is told to leave first. */
  end(why: string, reason?: DisconnectReason): Promise<void>;
  /** ↓ participantUpdate (a WHIP publisher has no signalling: nothing to tell). */
  sendParticipantUpdate(participants: ParticipantInfo[]): void;
  /** Another participant's video went live / ended (subscribers take or drop it). */
  publicationStarted(publication: Publication): void;
  publicationEnded(publication: Publication): void;
}

/** The room's one live video: whose it is, its TrackInfo and the decoder/relay behind it. */
export interface Publication {
  participant: RoomPublisher;
  info: TrackInfo;
  relay: VideoRelay;
}

/**
 * One media room (room name = stream id): any number of participants, one publisher slot, and at
 * most one live video publication whose decoded frames go to the stream's sink and to subscribers.
 * Server-made video (`attachServerVideo`) is the publication while no participant's video is.
 */
export class MediaRoom {
  readonly sid = newSid('RM_');
  readonly createdAtMs = Date.now();
  private readonly participants = new Map<string, RoomMember>();
  private publisher: RoomMember | undefined;
  private publication: Publication | undefined;
  private server: ServerPublisher | undefined;
  private framesIn = 0;
  private width = 0;
  private height = 0;
  private sinkErrors = 0;
  private closed = false;

  constructor(
    readonly name: string,
    private sink: RoomFrameSink,
    private readonly logger: Logger,
  ) {}

  /** The stream may hand out a new sink object over time; the latest one gets the frames. */
  setSink(sink: RoomFrameSink): void {
    this.sink = sink;
  }

  get isClosed(): boolean {
    return this.closed;
  }

  /** Adds a participant. Like LiveKit, a second connection of one identity replaces the first. */
  add(participant: RoomMember): void {
    for (const other of [...this.participants.values()]) {
      if (other.identity === participant.identity) {
        other.end('duplicate identity', DisconnectReason.DUPLICATE_IDENTITY);
      }
    }
    this.participants.set(participant.sid, participant);
    this.broadcast([participant.info()], participant);
  }

  /** Called once per participant when it goes, whatever the path. */
  remove(participant: RoomMember): void {
    if (this.participants.get(participant.sid) !== participant) return;
    this.participants.delete(participant.sid);
    if (this.publication?.participant === participant) this.endPublication(participant);
    if (this.publisher === participant) this.publisher = undefined;
    this.broadcast([participant.info()], participant);
  }

  /**
   * The publisher slot goes to the first participant that publishes video and stays until it
   * leaves. A participant of another identity asking meanwhile is refused (same identity is
   * handled by `add`, which replaces the old connection).
   */
  claimPublisher(participant: RoomMember): boolean {
    if (this.publisher && this.publisher !== participant) return false;
    this.publisher = participant;
    return true;
  }

  get currentPublication(): Publication | undefined {
    return this.publication;
  }

  /** The publisher's video track arrived: decode it, tell everyone, feed the subscribers. */
  startPublication(participant: RoomMember, info: TrackInfo, track: MediaStreamTrack): void {
    if (this.closed || this.publisher !== participant) return;
    this.stopPublication();
    const relay = VideoRelay.decoding(
      track,
      (frame) => this.onFrame(frame.width, frame.height, frame.data),
      (err) => this.onSinkError(err),
    );
    this.publication = { participant, info, relay };
    this.logger.info({ participant: participant.sid, track: info.sid }, 'video publication started');
    this.sink.onPublication?.();
    this.announce(this.publication);
  }

  /** The publisher unpublished or left: subscribers drop the track; the stream keeps its frames. */
  endPublication(participant: RoomPublisher): void {
    if (this.publication?.participant !== participant) return;
    this.stopPublication();
    // Server-made video, when the room has some, fills the empty slot again.
    this.startServerPublication();
  }

  /** Ends the live publication, whoever's it is. */
  private stopPublication(): void {
    const publication = this.publication;
    if (!publication) return;
    const participant = publication.participant;
    this.publication = undefined;
    for (const other of this.participants.values()) {
      if (other !== participant) other.publicationEnded(publication);
    }
    publication.relay.stop();
    this.logger.info({ participant: participant.sid, track: publication.info.sid }, 'video publication ended');
    if (participant === this.server) this.server.unpublish();
    if (this.participants.has(participant.sid) || participant === this.server) this.broadcast([participant.info()], participant);
  }

  /** Tells everyone a publication started (its owner's update first) and subscribes those who want it. */
  private announce(publication: Publication): void {
    this.broadcast([publication.participant.info()], publication.participant);
    for (const other of this.participants.values()) {
      if (other !== publication.participant) other.publicationStarted(publication);
    }
  }

  /**
   * Server-made video joins the room as participant `identity`; its track becomes the publication
   * whenever no participant's video is (a client's camera always takes precedence). Replaces an
   * earlier one.
   */
  attachServerVideo(opts: ServerVideoOptions): void {
    if (this.closed) return;
    this.detachServerVideo();
    this.server = new ServerPublisher(opts);
    this.broadcast([this.server.info()], this.server);
    this.startServerPublication();
  }

  /** The server-made video goes: its publication ends (if live) and its participant leaves. */
  detachServerVideo(): void {
    const server = this.server;
    if (!server) return;
    if (this.publication?.participant === server) this.stopPublication();
    this.server = undefined;
    server.leave();
    this.broadcast([server.info()], server);
  }

  /** Whether a subscriber receives the server-made video now. */
  get serverVideoWatched(): boolean {
    return this.server !== undefined && this.publication?.participant === this.server && this.publication.relay.watched;
  }

  /** A server-made frame for the subscribers (dropped unless the server's video is the publication). */
  pushServerVideo(frame: { width: number; height: number; data: Uint8Array }): void {
    if (this.server && this.publication?.participant === this.server) this.publication.relay.push(frame);
  }

  private startServerPublication(): void {
    if (this.closed || !this.server || this.publication) return;
    this.publication = { participant: this.server, info: this.server.publish(), relay: VideoRelay.pushed() };
    this.logger.info({ participant: this.server.sid, track: this.publication.info.sid }, 'server video publication started');
    this.announce(this.publication);
  }

  /** Tells the publisher a subscriber now receives its track (LiveKit's `trackSubscribed`). */
  notifySubscribed(trackSid: string): void {
    this.publication?.participant.trackSubscribed(trackSid);
  }

  private onFrame(width: number, height: number, data: Uint8Array): void {
    this.framesIn += 1;
    if (width !== this.width || height !== this.height) {
      this.logger.info({ width, height, frames: this.framesIn }, 'published frame size');
      this.width = width;
      this.height = height;
    }
    const raw: RawFrame = { width, height, format: 'i420', data };
    this.sink.onFrame(raw);
  }

  /** A throwing sink must not stop the relay; log the first failure and then every 100th. */
  private onSinkError(err: unknown): void {
    this.sinkErrors += 1;
    if (this.sinkErrors % 100 === 1) this.logger.warn({ err, failures: this.sinkErrors }, 'frame sink failed');
  }

  /** ParticipantInfo of everyone but `except` (for a join response), the server's publisher included. */
  othersInfo(except: RoomMember): ParticipantInfo[] {
    const others = [...this.participants.values()].filter((p) => p !== except).map((p) => p.info());
    if (this.server) others.push(this.server.info());
    return others;
  }

  /** ↓ participantUpdate to everyone but `except`. */
  private broadcast(infos: ParticipantInfo[], except: RoomPublisher): void {
    for (const other of this.participants.values()) {
      if (other !== except) other.sendParticipantUpdate(infos);
    }
  }

  info(): Partial<RoomProto> {
    const publishers = this.publication ? 1 : 0;
    return {
      sid: this.sid,
      name: this.name,
      creationTime: BigInt(Math.floor(this.createdAtMs / 1000)),
      creationTimeMs: BigInt(this.createdAtMs),
      numParticipants: this.participants.size + (this.server ? 1 : 0),
      numPublishers: publishers,
      emptyTimeout: 0,
      departureTimeout: 0,
      maxParticipants: 0,
    };
  }

  stats(): RoomStats {
    let subscribers = 0;
    for (const p of this.participants.values()) if (p !== this.publisher && p.canSubscribe) subscribers += 1;
    return {
      publishers: this.publisher ? 1 : 0,
      subscribers,
      framesIn: this.framesIn,
      width: this.width,
      height: this.height,
      publication: this.publication
        ? { identity: this.publication.participant.identity, trackSid: this.publication.info.sid, trackName: this.publication.info.name }
        : null,
    };
  }

  /** Ends every participant (↓ leave DISCONNECT) and the publication; resolves when sockets closed. */
  async close(reason: DisconnectReason): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const ending = [...this.participants.values()].map((p) => p.end('room closed', reason));
    this.stopPublication();
    this.server = undefined;
    await Promise.all(ending);
  }
}

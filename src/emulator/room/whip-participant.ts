/**
 * A WHIP publisher (RFC 9725) in a room: a participant with a peer connection and no signalling
 * socket, as LiveKit servers (1.9+) admit one (`pkg/service/whipservice.go`, `pkg/rtc`). The offer
 * is answered after ICE gathering (every candidate in the answer: the client may never trickle);
 * the client is learned from its connectivity checks when it sends no candidates. The first video
 * track becomes the room's publication once the peer connects, named from the offer's `a=msid`.
 * The participant lives as long as its peer connection: nothing received for `disconnectedAfterMs`
 * is ICE `disconnected`, `failedAfterMs` later `failed`, and `cleanupMs` after that it leaves (so
 * does a connection wrtc itself reports failed or closed, one never connected within
 * `connectTimeoutMs`, and a DELETE).
 */
import { DisconnectReason, ParticipantInfo_State, TrackInfo, TrackSource, TrackType } from '@livekit/protocol';
import type { ParticipantInfo } from '@livekit/protocol';
import type { Logger } from '../../lib/logger';
import { offeredVideo } from '../../lib/sdp';
import type { RoomGrant } from './auth';
import { PublisherTransport } from './peer';
import type { IncomingTrack } from './peer';
import type { MediaRoom, Publication, RoomMember } from './room';
import { newSid, participantInfo } from './signal';

/** The WHIP publisher's timeline (LiveKit: ICE disconnected ~10 s, failed ~5 s later, cleanup ~5 s). */
export interface WhipTiming {
  /** Longest wait for ICE gathering before answering. */
  gatherTimeoutMs: number;
  /** A peer not connected this long after the answer leaves. */
  connectTimeoutMs: number;
  /** Nothing received this long: the connection counts as disconnected… */
  disconnectedAfterMs: number;
  /** …then failed this much later… */
  failedAfterMs: number;
  /** …and the participant leaves this much after that. */
  cleanupMs: number;
}

export const WHIP_TIMING: WhipTiming = {
  gatherTimeoutMs: 3000,
  connectTimeoutMs: 20_000,
  disconnectedAfterMs: 10_000,
  failedAfterMs: 5000,
  cleanupMs: 5000,
};

/** How often a connected publisher's received bytes are read. */
const LIVENESS_CHECK_MS = 1000;

/** The track id (`a=msid:<stream> <track>`) of an offer's section `mid`, or of its first video section. */
function msidTrackOf(offerSdp: string, mid: string | null): string | undefined {
  const sections = offerSdp.split(/\r?\n(?=m=)/).slice(1);
  const section =
    sections.find((s) => mid !== null && new RegExp(`^a=mid:${mid.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\r?$`, 'm').test(s)) ??
    sections.find((s) => s.startsWith('m=video'));
  return section ? /^a=msid:\S+ (\S+)/m.exec(section)?.[1] : undefined;
}

export interface WhipParticipantOptions {
  room: MediaRoom;
  grant: RoomGrant;
  logger: Logger;
  timing: WhipTiming;
  /** Called once, when it leaves for whatever reason (the server forgets its resource). */
  onGone(participant: WhipParticipant): void;
}

export class WhipParticipant implements RoomMember {
  readonly sid = newSid('PA_');
  readonly identity: string;
  readonly name: string;
  readonly canSubscribe = false;
  private readonly room: MediaRoom;
  private readonly logger: Logger;
  private readonly timing: WhipTiming;
  private readonly onGone: (p: WhipParticipant) => void;
  private readonly pc: PublisherTransport;
  private readonly joinedAtMs = Date.now();
  private version = 0;
  private state = ParticipantInfo_State.JOINING;
  private offerSdp = '';
  /** The ICE session id (our ufrag): the ETag trickle PATCHes must name. */
  private ufrag = '';
  /** The first video track, published once the peer connects. */
  private pendingVideo: IncomingTrack | undefined;
  private video: TrackInfo | undefined;
  private connected = false;
  private connectTimer: NodeJS.Timeout | undefined;
  private livenessTimer: NodeJS.Timeout | undefined;
  private cleanupTimer: NodeJS.Timeout | undefined;
  private bytesReceived = -1;
  private lastHeardAtMs = 0;
  private ending: Promise<void> | undefined;

  constructor(opts: WhipParticipantOptions) {
    this.room = opts.room;
    this.identity = opts.grant.identity;
    this.name = opts.grant.name;
    this.timing = opts.timing;
    this.onGone = opts.onGone;
    this.logger = opts.logger.child({ room: opts.room.name, participant: this.sid, identity: this.identity, whip: true });
    this.pc = new PublisherTransport(
      {
        onCandidate: () => undefined, // the answer carries them all
        onFailed: () => this.leaveSoon('peer connection failed'),
        onState: (state) => this.onState(state),
      },
      this.logger,
      (incoming) => this.onIncomingTrack(incoming),
    );
  }

  get roomName(): string {
    return this.room.name;
  }

  get etag(): string {
    return this.ufrag;
  }

  /** Joins the room and answers the offer (after gathering). Throws when the offer cannot be applied. */
  async answer(offerSdp: string): Promise<string> {
    this.offerSdp = offerSdp;
    this.room.add(this);
    this.state = ParticipantInfo_State.JOINED;
    const { sdp } = await this.pc.answerGathered(offerSdp, this.timing.gatherTimeoutMs);
    if (this.ending) throw new Error('the participant left while its offer was answered');
    this.ufrag = /^a=ice-ufrag:(\S+)/m.exec(sdp)?.[1] ?? '';
    this.state = ParticipantInfo_State.ACTIVE;
    this.connectTimer = setTimeout(
      () => this.leaveSoon(`peer did not connect within ${this.timing.connectTimeoutMs} ms`, 0),
      this.timing.connectTimeoutMs,
    );
    this.connectTimer.unref();
    this.logger.info({ video: offeredVideo(offerSdp)?.length ?? 0 }, 'WHIP publisher joined');
    return sdp;
  }

  /** An `application/trickle-ice-sdpfrag` body: its candidates, each under the `a=mid` above it. */
  trickle(fragment: string): number {
    let mid = '0';
    let added = 0;
    for (const raw of fragment.split(/\r?\n/)) {
      const line = raw.trim();
      if (line.startsWith('a=mid:')) mid = line.slice('a=mid:'.length);
      else if (line.startsWith('a=candidate:')) {
        this.pc.addRemoteCandidate({ candidate: line.slice(2), sdpMid: mid, sdpMLineIndex: null });
        added += 1;
      }
    }
    return added;
  }

  private onIncomingTrack(incoming: IncomingTrack): void {
    if (incoming.track.kind !== 'video' || this.ending) return;
    if (this.pendingVideo || this.video) {
      this.logger.info('only the first video track feeds the stream; extra one ignored');
      return;
    }
    this.pendingVideo = incoming;
    if (this.connected) this.publish();
  }

  private onState(state: RTCPeerConnectionState): void {
    if (this.ending) return;
    this.logger.debug({ state }, 'WHIP peer connection state');
    if (state === 'connected' && !this.connected) {
      this.connected = true;
      clearTimeout(this.connectTimer);
      this.watchLiveness();
      this.publish();
    } else if (state === 'closed') {
      this.leaveSoon('peer connection closed');
    }
  }

  /** The first video track becomes the room's publication (the publisher slot permitting). */
  private publish(): void {
    const incoming = this.pendingVideo;
    if (!incoming || this.video || this.ending) return;
    this.pendingVideo = undefined;
    if (!this.room.claimPublisher(this)) {
      this.logger.info('room already has a publisher: WHIP publisher refused');
      void this.end('room already has a publisher', DisconnectReason.JOIN_FAILURE);
      return;
    }
    const trackId = msidTrackOf(this.offerSdp, incoming.mid) ?? incoming.track.id;
    this.video = new TrackInfo({
      sid: newSid('TR_'),
      type: TrackType.VIDEO,
      name: trackId,
      source: TrackSource.CAMERA,
      mid: incoming.mid ?? '',
      mimeType: 'video/VP8',
    });
    this.room.startPublication(this, this.video, incoming.track);
  }

  /**
   * A connected peer keeps sending media and RTCP; libwebrtc M106 notices a closed page only when
   * its own ICE checks fail (~17 s). Silence is counted here, as LiveKit's ICE agent counts it.
   */
  private watchLiveness(): void {
    this.lastHeardAtMs = Date.now();
    this.livenessTimer = setInterval(() => void this.checkLiveness(), LIVENESS_CHECK_MS);
    this.livenessTimer.unref();
  }

  private async checkLiveness(): Promise<void> {
    let bytes = 0;
    try {
      const report = await this.pc.pc.getStats();
      report.forEach((s: { type?: string; bytesReceived?: number }) => {
        if (s.type === 'transport') bytes += s.bytesReceived ?? 0;
      });
    } catch {
      return; // closed meanwhile
    }
    if (this.ending || this.cleanupTimer) return;
    const now = Date.now();
    if (bytes !== this.bytesReceived) {
      this.bytesReceived = bytes;
      this.lastHeardAtMs = now;
      return;
    }
    const silentMs = now - this.lastHeardAtMs;
    if (silentMs >= this.timing.disconnectedAfterMs + this.timing.failedAfterMs) this.leaveSoon(`nothing received for ${silentMs} ms`);
  }

  /** The connection failed: the participant leaves after the clean-up delay (`delayMs`, default the timing's). */
  private leaveSoon(why: string, delayMs = this.timing.cleanupMs): void {
    if (this.ending || this.cleanupTimer) return;
    this.logger.info({ why, cleanupMs: delayMs }, 'WHIP publisher connection failed');
    clearInterval(this.livenessTimer);
    this.cleanupTimer = setTimeout(() => void this.end(why, DisconnectReason.CONNECTION_TIMEOUT), delayMs);
    this.cleanupTimer.unref();
  }

  /** Leaves the room (DELETE, failure, room closed, replaced by the same identity). Idempotent. */
  end(why: string, reason: DisconnectReason = DisconnectReason.CLIENT_INITIATED): Promise<void> {
    if (this.ending) return this.ending;
    this.ending = Promise.resolve();
    this.state = ParticipantInfo_State.DISCONNECTED;
    clearTimeout(this.connectTimer);
    clearTimeout(this.cleanupTimer);
    clearInterval(this.livenessTimer);
    this.logger.info({ why, reason: DisconnectReason[reason] }, 'WHIP publisher left');
    this.room.remove(this);
    this.video = undefined;
    this.pendingVideo = undefined;
    this.pc.close();
    this.onGone(this);
    return this.ending;
  }

  get gone(): boolean {
    return this.ending !== undefined;
  }

  info(): ParticipantInfo {
    this.version += 1;
    const live = this.video && this.room.currentPublication?.participant === this ? [this.video] : [];
    const { sid, identity, name, state, version, joinedAtMs } = this;
    return participantInfo({ sid, identity, name, state, version, joinedAtMs, tracks: live, canPublish: true, canSubscribe: false });
  }

  // No signalling socket: nothing to tell a WHIP publisher, and it subscribes to nothing.
  trackSubscribed(): void {}
  sendParticipantUpdate(): void {}
  publicationStarted(_publication: Publication): void {}
  publicationEnded(_publication: Publication): void {}
}

import {
  DisconnectReason,
  JoinResponse,
  LeaveRequest_Action,
  ParticipantInfo_State,
  RequestResponse_Reason,
  ServerInfo_Edition,
  SignalTarget,
  TrackInfo,
  TrackType,
  protoInt64,
} from '@livekit/protocol';
import type { AddTrackRequest, ParticipantInfo, SessionDescription, TrickleRequest, UpdateSubscription } from '@livekit/protocol';
import WebSocket from 'ws';
import type { RawData } from 'ws';
import type { Logger } from '../../lib/logger';
import type { RoomGrant } from './auth';
import { PublisherTransport, SubscriberTransport } from './peer';
import type { IncomingTrack, TransportEvents } from './peer';
import type { MediaRoom, Publication, RoomMember } from './room';
import { SERVER_PROTOCOL, SERVER_VERSION, decodeRequest, encodeResponse, newSid, parseCandidate, participantInfo } from './signal';
import type { JoinParams, ResponseMessage } from './signal';

export interface ParticipantOptions {
  room: MediaRoom;
  ws: WebSocket;
  grant: RoomGrant;
  join: JoinParams;
  logger: Logger;
  pingIntervalSeconds: number;
  pingTimeoutSeconds: number;
}

/** How long a closing socket may take to answer the close handshake before it is cut. */
const CLOSE_GRACE_MS = 1000;

/** Sends ↓ leave and closes: the answer to a resume the server cannot honour (client rejoins). */
export function refuseResume(ws: WebSocket): Promise<void> {
  sendOn(ws, {
    case: 'leave',
    value: { canReconnect: true, reason: DisconnectReason.STATE_MISMATCH, action: LeaveRequest_Action.RECONNECT },
  });
  return closeSocket(ws);
}

function sendOn(ws: WebSocket, message: ResponseMessage): void {
  if (ws.readyState !== WebSocket.OPEN) return;
  ws.send(encodeResponse(message), (err) => {
    if (err) ws.terminate();
  });
}

function closeSocket(ws: WebSocket): Promise<void> {
  if (ws.readyState === WebSocket.CLOSED) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => ws.terminate(), CLOSE_GRACE_MS);
    timer.unref();
    ws.once('close', () => {
      clearTimeout(timer);
      resolve();
    });
    if (ws.readyState === WebSocket.OPEN) ws.close(1000);
  });
}

function toBuffer(data: RawData): Buffer {
  if (Buffer.isBuffer(data)) return data;
  if (Array.isArray(data)) return Buffer.concat(data);
  return Buffer.from(data);
}

/** Whether an offer no longer sends on `mid` (the client unpublished the track). */
function stoppedSending(offerSdp: string, mid: string): boolean {
  const section = offerSdp.split(/\r\n(?=m=)/).find((s) => new RegExp(`^a=mid:${escapeRegExp(mid)}\\r?$`, 'm').test(s));
  if (!section) return true;
  return /^m=\S+ 0 /.test(section) || /^a=(inactive|recvonly)\r?$/m.test(section);
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/**
 * One signalling session: a WebSocket speaking LiveKit's protocol and the peer connection(s)
 * behind it. Every way out (leave, socket close, ping timeout, room closed, replaced, refused)
 * goes through `end`, which is idempotent.
 */
export class Participant implements RoomMember {
  readonly sid = newSid('PA_');
  readonly identity: string;
  readonly name: string;
  readonly canPublish: boolean;
  readonly canSubscribe: boolean;
  private readonly room: MediaRoom;
  private readonly ws: WebSocket;
  private readonly join: JoinParams;
  private readonly logger: Logger;
  private readonly pingIntervalSeconds: number;
  private readonly pingTimeoutSeconds: number;
  private readonly joinedAtMs = Date.now();
  private version = 0;
  private state = ParticipantInfo_State.JOINING;
  private disconnectReason = DisconnectReason.UNKNOWN_REASON;
  private readonly publisherPc: PublisherTransport;
  /** v0 only: the server-offered connection subscriptions arrive on. */
  private readonly subscriberPc: SubscriberTransport | undefined;
  /** Answered addTrack requests by client track id (cid), waiting for their media. */
  private readonly pendingTracks = new Map<string, TrackInfo>();
  /** This participant's live video publication. */
  private video: { info: TrackInfo; mid: string | null } | undefined;
  /** Relay tracks this participant receives, by track sid. */
  private readonly received = new Map<string, { track: MediaStreamTrack; publication: Publication }>();
  /** Track sids asked for with ↑ subscription (when auto-subscribe is off). */
  private readonly wanted = new Set<string>();
  private lastSeenMs = Date.now();
  private pingTimer: NodeJS.Timeout | undefined;
  private ending: Promise<void> | undefined;

  constructor(opts: ParticipantOptions) {
    this.room = opts.room;
    this.ws = opts.ws;
    this.join = opts.join;
    this.identity = opts.grant.identity;
    this.name = opts.grant.name;
    this.canPublish = opts.grant.canPublish;
    this.canSubscribe = opts.grant.canSubscribe;
    this.pingIntervalSeconds = opts.pingIntervalSeconds;
    this.pingTimeoutSeconds = opts.pingTimeoutSeconds;
    this.logger = opts.logger.child({ room: opts.room.name, participant: this.sid, identity: this.identity });
    const events: TransportEvents = {
      onCandidate: (candidateInit, target) => this.send({ case: 'trickle', value: { candidateInit, target } }),
      onFailed: (target) =>
        void this.end(
          `${SignalTarget[target].toLowerCase()} connection failed`,
          DisconnectReason.MEDIA_FAILURE,
          LeaveRequest_Action.RECONNECT,
        ),
    };
    this.publisherPc = new PublisherTransport(events, this.logger, (incoming) => this.onIncomingTrack(incoming));
    this.subscriberPc =
      opts.join.path === 'v0' && this.canSubscribe
        ? new SubscriberTransport(
            events,
            this.logger,
            (offer) => this.send({ case: 'offer', value: { type: 'offer', ...offer } }),
            // An unanswered offer is as fatal as silence.
            this.pingTimeoutSeconds * 1000,
          )
        : undefined;
  }

  /** Sends the join response, then serves the session. */
  start(): void {
    this.ws.on('message', (data, isBinary) => this.onMessage(data, isBinary));
    this.ws.on('close', () => void this.end('signal closed'));
    this.ws.on('error', (err) => this.logger.debug({ err: err.message }, 'signal socket error'));
    this.state = ParticipantInfo_State.JOINED;
    this.room.add(this);
    if (this.ending) return;
    this.send({
      case: 'join',
      value: new JoinResponse({
        room: this.room.info(),
        participant: this.info(),
        otherParticipants: this.room.othersInfo(this),
        serverVersion: SERVER_VERSION,
        serverInfo: { version: SERVER_VERSION, protocol: SERVER_PROTOCOL, edition: ServerInfo_Edition.Standard, nodeId: 'emulator' },
        subscriberPrimary: this.subscriberPc !== undefined,
        pingInterval: this.pingIntervalSeconds,
        pingTimeout: this.pingTimeoutSeconds,
        iceServers: [],
        fastPublish: false,
      }),
    });
    this.state = ParticipantInfo_State.ACTIVE;
    this.logger.info({ path: this.join.path, canPublish: this.canPublish, canSubscribe: this.canSubscribe }, 'participant joined');
    this.pingTimer = setInterval(() => this.checkAlive(), this.pingIntervalSeconds * 1000);
    this.pingTimer.unref();
    if (this.join.publisherOffer) this.onOffer(this.join.publisherOffer);
    if (this.subscriberPc) {
      const publication = this.room.currentPublication;
      if (publication && this.wants(publication)) this.subscribe(publication);
      else this.subscriberPc.negotiate();
    }
  }

  private checkAlive(): void {
    if (Date.now() - this.lastSeenMs > this.pingTimeoutSeconds * 1000) {
      void this.end('ping timeout', DisconnectReason.SIGNAL_CLOSE, LeaveRequest_Action.RECONNECT);
    }
  }

  private send(message: ResponseMessage): void {
    sendOn(this.ws, message);
  }

  private onMessage(data: RawData, isBinary: boolean): void {
    if (this.ending) return;
    this.lastSeenMs = Date.now();
    let message;
    try {
      message = decodeRequest(toBuffer(data), isBinary);
    } catch (err) {
      this.logger.debug({ err: (err as Error).message }, 'undecodable signal request ignored');
      return;
    }
    switch (message.case) {
      case 'offer':
        this.onOffer(message.value);
        break;
      case 'answer':
        this.subscriberPc?.applyAnswer(message.value);
        break;
      case 'trickle':
        this.onTrickle(message.value);
        break;
      case 'addTrack':
        this.onAddTrack(message.value);
        break;
      case 'subscription':
        this.onSubscription(message.value);
        break;
      case 'ping':
        this.send({ case: 'pong', value: protoInt64.parse(Date.now()) });
        break;
      case 'pingReq':
        this.send({
          case: 'pongResp',
          value: { lastPingTimestamp: message.value.timestamp, timestamp: protoInt64.parse(Date.now()) },
        });
        break;
      case 'leave':
        void this.end('client left');
        break;
      default:
        // mute, metadata, layers, track settings, sync state, permissions, data tracks: not modelled
        break;
    }
  }

  private onOffer(offer: SessionDescription): void {
    this.publisherPc
      .answer(offer)
      .then(({ sdp, acceptedRids }) => {
        if (acceptedRids.length > 0) this.logger.debug({ acceptedRids }, 'simulcast: top layer accepted');
        this.send({ case: 'answer', value: { type: 'answer', sdp, id: offer.id } });
        if (this.video?.mid && stoppedSending(offer.sdp, this.video.mid)) this.unpublishVideo();
      })
      .catch((err: unknown) => {
        if (this.ending) return;
        this.logger.warn({ err: (err as Error).message }, 'publisher offer refused');
        void this.end('negotiation failed', DisconnectReason.STATE_MISMATCH, LeaveRequest_Action.RECONNECT);
      });
  }

  private onTrickle(trickle: TrickleRequest): void {
    const candidate = parseCandidate(trickle.candidateInit);
    if (!candidate) return;
    if (trickle.target === this.publisherPc.target) this.publisherPc.addRemoteCandidate(candidate);
    else this.subscriberPc?.addRemoteCandidate(candidate);
  }

  private onAddTrack(req: AddTrackRequest): void {
    if (!this.canPublish) {
      this.logger.info({ cid: req.cid }, 'addTrack refused: token cannot publish');
      this.send({
        case: 'requestResponse',
        value: { reason: RequestResponse_Reason.NOT_ALLOWED, message: 'not allowed to publish', request: { case: 'addTrack', value: req } },
      });
      return;
    }
    if (req.type === TrackType.VIDEO && !this.room.claimPublisher(this)) {
      this.logger.info({ cid: req.cid }, 'second publisher refused');
      void this.end('room already has a publisher', DisconnectReason.JOIN_FAILURE);
      return;
    }
    const info =
      this.pendingTracks.get(req.cid) ??
      new TrackInfo({
        sid: newSid('TR_'),
        type: req.type,
        name: req.name,
        source: req.source,
        width: req.width,
        height: req.height,
        muted: req.muted,
        simulcast: req.layers.length > 1,
        layers: req.layers,
        stream: req.stream,
        mimeType: req.type === TrackType.VIDEO ? 'video/VP8' : 'audio/opus',
      });
    this.pendingTracks.set(req.cid, info);
    this.send({ case: 'trackPublished', value: { cid: req.cid, track: info } });
  }

  /** Media arrived on the publisher connection: the first announced video becomes the room's video. */
  private onIncomingTrack({ track, mid }: IncomingTrack): void {
    if (track.kind !== 'video' || this.ending) return;
    let cid: string | undefined = this.pendingTracks.has(track.id) ? track.id : undefined;
    cid ??= [...this.pendingTracks.entries()].find(([, info]) => info.type === TrackType.VIDEO)?.[0];
    const info = cid === undefined ? undefined : this.pendingTracks.get(cid);
    if (cid === undefined || !info) {
      this.logger.warn({ trackId: track.id }, 'video track without addTrack ignored');
      return;
    }
    this.pendingTracks.delete(cid);
    if (this.video) {
      this.logger.info({ track: info.sid }, 'only the first video track feeds the stream; extra one ignored');
      return;
    }
    info.mid = mid ?? '';
    this.video = { info, mid };
    this.room.startPublication(this, info, track);
  }

  private unpublishVideo(): void {
    if (!this.video) return;
    this.video = undefined;
    this.room.endPublication(this);
  }

  private wants(publication: Publication): boolean {
    return this.join.autoSubscribe || this.wanted.has(publication.info.sid);
  }

  private subscribe(publication: Publication): void {
    if (!this.subscriberPc || this.received.has(publication.info.sid)) return;
    const track = publication.relay.createTrack();
    this.received.set(publication.info.sid, { track, publication });
    this.subscriberPc.addTrack(track, publication.participant.sid, publication.info.sid);
    this.subscriberPc.negotiate();
    this.room.notifySubscribed(publication.info.sid);
    this.logger.info({ track: publication.info.sid }, 'subscribed');
  }

  private unsubscribe(trackSid: string): void {
    const entry = this.received.get(trackSid);
    if (!entry) return;
    this.received.delete(trackSid);
    if (this.subscriberPc?.removeTrack(trackSid)) this.subscriberPc.negotiate();
    entry.publication.relay.releaseTrack(entry.track);
  }

  private onSubscription(update: UpdateSubscription): void {
    const sids = [...update.trackSids, ...update.participantTracks.flatMap((pt) => pt.trackSids)];
    const publication = this.room.currentPublication;
    for (const sid of sids) {
      if (update.subscribe) {
        this.wanted.add(sid);
        if (publication?.info.sid === sid && publication.participant !== this) this.subscribe(publication);
      } else {
        this.wanted.delete(sid);
        this.unsubscribe(sid);
      }
    }
  }

  /** Room → participant: another participant's video went live (its update was already sent). */
  publicationStarted(publication: Publication): void {
    if (this.ending || !this.subscriberPc || !this.wants(publication)) return;
    this.subscribe(publication);
  }

  /** Room → participant: that video ended. */
  publicationEnded(publication: Publication): void {
    this.unsubscribe(publication.info.sid);
  }

  trackSubscribed(trackSid: string): void {
    this.send({ case: 'trackSubscribed', value: { trackSid } });
  }

  sendParticipantUpdate(participants: ParticipantInfo[]): void {
    if (!this.ending) this.send({ case: 'update', value: { participants } });
  }

  /** This participant as others see it; the version grows so clients never drop an update. */
  info(): ParticipantInfo {
    this.version += 1;
    const live = this.video && this.room.currentPublication?.participant === this ? [this.video.info] : [];
    const { sid, identity, name, state, version, joinedAtMs } = this;
    return participantInfo({
      sid,
      identity,
      name,
      state,
      version,
      joinedAtMs,
      tracks: live,
      canPublish: this.canPublish,
      canSubscribe: this.canSubscribe,
    });
  }

  /**
   * Ends the session. With a `reason`, the client first gets ↓ leave (`action`, default
   * DISCONNECT); without one (client left, socket gone) it just closes. Resolves once the socket
   * is closed.
   */
  end(why: string, reason?: DisconnectReason, action: LeaveRequest_Action = LeaveRequest_Action.DISCONNECT): Promise<void> {
    if (this.ending) return this.ending;
    this.state = ParticipantInfo_State.DISCONNECTED;
    this.disconnectReason = reason ?? DisconnectReason.CLIENT_INITIATED;
    if (this.pingTimer) clearInterval(this.pingTimer);
    if (reason !== undefined) {
      this.send({ case: 'leave', value: { canReconnect: action !== LeaveRequest_Action.DISCONNECT, reason, action } });
    }
    this.ending = closeSocket(this.ws);
    this.logger.info({ why }, 'participant left');
    // Stops the relay's decoder (if this was the publisher) before its connection closes.
    this.room.remove(this);
    for (const sid of [...this.received.keys()]) this.unsubscribe(sid);
    this.pendingTracks.clear();
    this.video = undefined;
    this.publisherPc.close();
    this.subscriberPc?.close();
    return this.ending;
  }
}

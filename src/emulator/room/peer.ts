import { SignalTarget } from '@livekit/protocol';
import type { SessionDescription } from '@livekit/protocol';
import type { Logger } from '../../lib/logger';
import { START_BITRATE_KBPS, acceptTopSimulcastLayer, mids, withStartBitrate } from './sdp';
import { candidateToJson } from './signal';
import { RTCPeerConnection, createMediaStream } from './wrtc';

export interface TransportEvents {
  /** A local candidate as strict JSON, ready for ↓ trickle. */
  onCandidate(candidateInit: string, target: SignalTarget): void;
  /** ICE/DTLS failed for good, or an offer went unanswered: the participant should go (the client then rejoins). */
  onFailed(target: SignalTarget): void;
  /** Every connection state change (a WHIP publisher is watched by it). */
  onState?(state: RTCPeerConnectionState, target: SignalTarget): void;
}

type SdpInit = { type: 'offer' | 'answer'; sdp: string };

/**
 * One wrtc peer connection: every SDP operation runs in order on one promise chain, and remote
 * candidates wait until a remote description exists. Only loopback/host candidates are gathered
 * (no ICE servers), so nothing leaves the machine.
 */
abstract class Transport {
  readonly pc: RTCPeerConnection;
  private chain: Promise<void> = Promise.resolve();
  private pendingCandidates: RTCIceCandidateInit[] = [];
  private hasRemote = false;
  protected closed = false;

  constructor(
    readonly target: SignalTarget,
    protected readonly events: TransportEvents,
    protected readonly logger: Logger,
  ) {
    this.pc = new RTCPeerConnection({ iceServers: [] });
    this.pc.onicecandidate = (ev) => {
      if (this.closed) return;
      const json = candidateToJson(ev.candidate, mids(this.pc.localDescription?.sdp ?? '')[0] ?? '0');
      if (json) this.events.onCandidate(json, this.target);
    };
    this.pc.onconnectionstatechange = () => {
      const state = this.pc.connectionState;
      this.logger.debug({ target: SignalTarget[this.target], state }, 'peer connection state');
      if (this.closed) return;
      this.events.onState?.(state, this.target);
      if (state === 'failed') this.events.onFailed(this.target);
    };
  }

  /** Runs `fn` after every earlier operation; a failure is logged and rethrown to the caller. */
  protected run<T>(fn: () => Promise<T>): Promise<T> {
    const result = this.chain.then(() => {
      if (this.closed) throw new Error('peer connection closed');
      return fn();
    });
    this.chain = result.then(
      () => undefined,
      () => undefined,
    );
    return result;
  }

  protected async setRemote(desc: SdpInit): Promise<void> {
    await this.pc.setRemoteDescription(desc);
    this.hasRemote = true;
    for (const candidate of this.pendingCandidates.splice(0)) await this.addCandidateNow(candidate);
  }

  addRemoteCandidate(candidate: RTCIceCandidateInit): void {
    if (this.closed) return;
    if (!this.hasRemote) {
      this.pendingCandidates.push(candidate);
      return;
    }
    void this.run(() => this.addCandidateNow(candidate)).catch(() => undefined);
  }

  private async addCandidateNow(candidate: RTCIceCandidateInit): Promise<void> {
    try {
      await this.pc.addIceCandidate(candidate);
    } catch (err) {
      this.logger.debug({ err: (err as Error).message }, 'remote candidate refused');
    }
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.pendingCandidates = [];
    this.pc.onicecandidate = null;
    this.pc.onconnectionstatechange = null;
    this.pc.onicegatheringstatechange = null;
    this.pc.ontrack = null;
    this.pc.ondatachannel = null;
    this.pc.close();
  }
}

/** A received media track and the transceiver (mid) it came on. */
export interface IncomingTrack {
  track: MediaStreamTrack;
  mid: string | null;
}

/** The client's publisher connection: the client offers, the server answers. */
export class PublisherTransport extends Transport {
  /** Kept so wrtc does not collect the client's data channels (their payloads are ignored). */
  private readonly channels: RTCDataChannel[] = [];

  constructor(events: TransportEvents, logger: Logger, onTrack: (incoming: IncomingTrack) => void) {
    super(SignalTarget.PUBLISHER, events, logger);
    this.pc.ontrack = (ev) => {
      if (!this.closed) onTrack({ track: ev.track, mid: ev.transceiver?.mid ?? null });
    };
    this.pc.ondatachannel = (ev) => {
      this.channels.push(ev.channel);
    };
  }

  /**
   * Answers an offer; the answer carries the offer's id (clients time out otherwise). The sent
   * answer (not the local description) is munged: top simulcast layer accepted, start bitrate set.
   */
  answer(offer: SessionDescription): Promise<{ sdp: string; acceptedRids: { mid: string; rid: string }[] }> {
    return this.run(() => this.answerNow(offer.sdp));
  }

  /**
   * Answers a WHIP offer once ICE gathering is complete (or after `gatherTimeoutMs` with what was
   * gathered): a WHIP client may never trickle, so the answer carries every server candidate.
   */
  answerGathered(offerSdp: string, gatherTimeoutMs: number): Promise<{ sdp: string; acceptedRids: { mid: string; rid: string }[] }> {
    return this.run(() => this.answerNow(offerSdp, gatherTimeoutMs));
  }

  private async answerNow(
    offerSdp: string,
    gatherTimeoutMs?: number,
  ): Promise<{ sdp: string; acceptedRids: { mid: string; rid: string }[] }> {
    await this.setRemote({ type: 'offer', sdp: offerSdp });
    const answer = await this.pc.createAnswer();
    await this.pc.setLocalDescription(answer);
    if (gatherTimeoutMs !== undefined) await this.gathered(gatherTimeoutMs);
    const local = this.pc.localDescription?.sdp ?? answer.sdp ?? '';
    const munged = acceptTopSimulcastLayer(offerSdp, local);
    return { sdp: withStartBitrate(munged.sdp, START_BITRATE_KBPS), acceptedRids: munged.accepted };
  }

  /** Resolves when ICE gathering completes, or after `timeoutMs`. */
  private gathered(timeoutMs: number): Promise<void> {
    if (this.pc.iceGatheringState === 'complete') return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.pc.onicegatheringstatechange = null;
        resolve();
      };
      const timer = setTimeout(done, timeoutMs);
      this.pc.onicegatheringstatechange = () => {
        if (this.pc.iceGatheringState === 'complete') done();
      };
    });
  }

  override close(): void {
    for (const channel of this.channels.splice(0)) {
      channel.onmessage = null;
      channel.close();
    }
    super.close();
  }
}

/** A forwarded track on a subscriber connection. */
export interface SubscribedTrack {
  trackSid: string;
  sender: RTCRtpSender;
  transceiver: RTCRtpTransceiver;
}

/**
 * The server-offered subscriber connection (v0 path). It opens the `_reliable`/`_lossy` data
 * channels LiveKit opens in subscriber-primary mode, so its first offer has something to connect
 * even before a track is published; tracks are added and removed with renegotiation.
 */
export class SubscriberTransport extends Transport {
  private readonly channels: RTCDataChannel[];
  private readonly subscribed = new Map<string, SubscribedTrack>();
  private offerId = 0;
  private awaitingAnswer = false;
  private renegotiate = false;
  private answerTimer: NodeJS.Timeout | undefined;

  constructor(
    events: TransportEvents,
    logger: Logger,
    private readonly sendOffer: (offer: { sdp: string; id: number; midToTrackId: Record<string, string> }) => void,
    /** How long the client may take to answer an offer. */
    private readonly answerTimeoutMs: number,
  ) {
    super(SignalTarget.SUBSCRIBER, events, logger);
    this.channels = [
      this.pc.createDataChannel('_reliable', { ordered: true }),
      this.pc.createDataChannel('_lossy', { ordered: false, maxRetransmits: 0 }),
    ];
  }

  /** Adds a track sent as stream `<participant sid>|<track sid>` (how clients find its publication). */
  addTrack(track: MediaStreamTrack, participantSid: string, trackSid: string): void {
    if (this.closed || this.subscribed.has(trackSid)) return;
    const transceiver = this.pc.addTransceiver(track, {
      direction: 'sendonly',
      streams: [createMediaStream(`${participantSid}|${trackSid}`)],
    });
    this.subscribed.set(trackSid, { trackSid, sender: transceiver.sender, transceiver });
  }

  /** Stops forwarding a track; the caller renegotiates. Returns whether it was there. */
  removeTrack(trackSid: string): boolean {
    const entry = this.subscribed.get(trackSid);
    if (!entry) return false;
    this.subscribed.delete(trackSid);
    if (!this.closed) {
      try {
        this.pc.removeTrack(entry.sender);
      } catch (err) {
        this.logger.debug({ err: (err as Error).message }, 'removeTrack failed');
      }
    }
    return true;
  }

  has(trackSid: string): boolean {
    return this.subscribed.has(trackSid);
  }

  /** Offers the current state; while an answer is outstanding the next round waits for it. */
  negotiate(): void {
    if (this.closed) return;
    if (this.awaitingAnswer) {
      this.renegotiate = true;
      return;
    }
    this.awaitingAnswer = true;
    this.run(async () => {
      const offer = await this.pc.createOffer();
      await this.pc.setLocalDescription(offer);
      this.offerId += 1;
      this.answerTimer = setTimeout(() => {
        this.logger.warn({ id: this.offerId }, 'subscriber offer unanswered');
        this.events.onFailed(this.target);
      }, this.answerTimeoutMs);
      this.answerTimer.unref();
      this.sendOffer({ sdp: this.pc.localDescription?.sdp ?? offer.sdp ?? '', id: this.offerId, midToTrackId: this.midToTrackId() });
    }).catch((err: unknown) => {
      this.awaitingAnswer = false;
      if (!this.closed) this.logger.warn({ err: (err as Error).message }, 'subscriber offer failed');
    });
  }

  private midToTrackId(): Record<string, string> {
    const map: Record<string, string> = {};
    for (const { trackSid, transceiver } of this.subscribed.values()) {
      if (transceiver.mid) map[transceiver.mid] = trackSid;
    }
    return map;
  }

  /** Applies the client's answer (id 0 accepted from clients that do not echo ids). */
  applyAnswer(answer: SessionDescription): void {
    if (this.closed || !this.awaitingAnswer) return;
    if (answer.id !== 0 && answer.id !== this.offerId) {
      this.logger.debug({ id: answer.id, expected: this.offerId }, 'stale subscriber answer ignored');
      return;
    }
    clearTimeout(this.answerTimer);
    this.run(() => this.setRemote({ type: 'answer', sdp: answer.sdp }))
      .catch((err: unknown) => {
        if (!this.closed) this.logger.warn({ err: (err as Error).message }, 'subscriber answer refused');
      })
      .finally(() => {
        this.awaitingAnswer = false;
        if (this.renegotiate) {
          this.renegotiate = false;
          this.negotiate();
        }
      });
  }

  override close(): void {
    clearTimeout(this.answerTimer);
    for (const channel of this.channels.splice(0)) channel.close();
    this.subscribed.clear();
    super.close();
  }
}

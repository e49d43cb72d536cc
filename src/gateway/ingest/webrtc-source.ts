import type { RelayConfig, WebrtcConfig } from '../../config';
import type { Logger } from '../../lib/logger';
import type { I420Frame, WrtcModule, WrtcVideoSink } from './natives';

export interface WebrtcSourceOptions {
  wrtc: WrtcModule;
  cfg: Pick<RelayConfig, 'iceGatheringTimeoutMs' | 'connectTimeoutMs' | 'disconnectGraceMs' | 'peerSilenceMs'> &
    Pick<WebrtcConfig, 'iceServers'>;
  logger: Logger;
  /** Every decoded frame of the client's video track, on wrtc's callback (keep it short). */
  onFrame(frame: I420Frame): void;
  /** The peer is gone (failed, closed, never connected, or disconnected past the grace period). */
  onLost(why: string): void;
}

/** Raised when the client's offer cannot be applied (the caller answers 422). */
export class OfferRejected extends Error {
  override name = 'OfferRejected';
}

/**
 * The legacy webrtc transport, server side: answers the client's offer with `@roamhq/wrtc` once ICE
 * gathering is complete (legacy clients cannot trickle, so the answer carries every server
 * candidate) and decodes the first video track it receives into I420 frames.
 */
export class WebrtcSource {
  private sink: WrtcVideoSink | undefined;
  private connectTimer: NodeJS.Timeout | undefined;
  private graceTimer: NodeJS.Timeout | undefined;
  private livenessTimer: NodeJS.Timeout | undefined;
  private bytesReceived = -1;
  private lastHeardAtMs = 0;
  private closed = false;
  private lostReported = false;
  /** Frames decoded so far. */
  framesDecoded = 0;
  width = 0;
  height = 0;

  private constructor(
    private readonly pc: RTCPeerConnection,
    private readonly opts: WebrtcSourceOptions,
  ) {}

  /** Applies the offer and returns the source with its complete answer. Throws OfferRejected. */
  static async answer(offerSdp: string, opts: WebrtcSourceOptions): Promise<{ source: WebrtcSource; answerSdp: string }> {
    const pc = new opts.wrtc.RTCPeerConnection({ iceServers: opts.cfg.iceServers });
    const source = new WebrtcSource(pc, opts);
    try {
      const answerSdp = await source.negotiate(offerSdp);
      source.watch();
      return { source, answerSdp };
    } catch (err) {
      source.close();
      throw err;
    }
  }

  get connectionState(): RTCPeerConnectionState {
    return this.pc.connectionState;
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.connectTimer);
    clearTimeout(this.graceTimer);
    clearInterval(this.livenessTimer);
    if (this.sink) {
      this.sink.onframe = null;
      this.sink.stop();
      this.sink = undefined;
    }
    this.pc.ontrack = null;
    this.pc.onconnectionstatechange = null;
    this.pc.onicegatheringstatechange = null;
    this.pc.close();
  }

  private async negotiate(offerSdp: string): Promise<string> {
    this.pc.ontrack = (ev) => {
      // The first video track feeds the stream; audio and further video tracks are ignored.
      if (this.closed || ev.track.kind !== 'video' || this.sink) return;
      const sink = this.opts.wrtc.createVideoSink(ev.track);
      sink.onframe = ({ frame }) => {
        if (this.closed) return;
        this.framesDecoded += 1;
        this.width = frame.width;
        this.height = frame.height;
        this.opts.onFrame(frame);
      };
      this.sink = sink;
    };
    try {
      await this.pc.setRemoteDescription({ type: 'offer', sdp: offerSdp });
    } catch (err) {
      throw new OfferRejected(`the offer could not be applied: ${(err as Error).message}`);
    }
    const answer = await this.pc.createAnswer();
    await this.pc.setLocalDescription(answer);
    await this.gathered();
    const sdp = this.pc.localDescription?.sdp;
    if (!sdp) throw new Error('no local description after gathering');
    return sdp;
  }

  /** Resolves when ICE gathering completes, or after the configured wait with what was gathered. */
  private gathered(): Promise<void> {
    if (this.pc.iceGatheringState === 'complete') return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.opts.logger.warn(
          { timeoutMs: this.opts.cfg.iceGatheringTimeoutMs },
          'ICE gathering incomplete; answering with the candidates so far',
        );
        resolve();
      }, this.opts.cfg.iceGatheringTimeoutMs);
      this.pc.onicegatheringstatechange = () => {
        if (this.pc.iceGatheringState !== 'complete') return;
        clearTimeout(timer);
        this.pc.onicegatheringstatechange = null;
        resolve();
      };
    });
  }

  /** Peer loss: never connected, failed, closed, or disconnected for longer than the grace period. */
  private watch(): void {
    const { cfg } = this.opts;
    this.connectTimer = setTimeout(() => this.lost(`peer did not connect within ${cfg.connectTimeoutMs} ms`), cfg.connectTimeoutMs);
    this.pc.onconnectionstatechange = () => {
      const state = this.pc.connectionState;
      this.opts.logger.debug({ state, ice: this.pc.iceConnectionState }, 'webrtc peer connection state');
      if (state === 'connected') {
        clearTimeout(this.connectTimer);
        this.watchLiveness();
        clearTimeout(this.graceTimer);
        this.graceTimer = undefined;
      } else if (state === 'disconnected') {
        this.graceTimer ??= setTimeout(() => this.lost(`peer disconnected for ${cfg.disconnectGraceMs} ms`), cfg.disconnectGraceMs);
      } else if (state === 'failed' || state === 'closed') {
        this.lost(`peer connection ${state}`);
      }
    };
  }

  /**
   * A peer that closes (page closed, `pc.close()`) sends nothing that libwebrtc M106 acts on, and its
   * ICE state only turns `failed` after ~17 s (measured). A live sender keeps sending media and RTCP
   * (browsers send frames even for a disabled track), so a transport that received nothing for
   * `peerSilenceMs` has lost its peer.
   */
  private watchLiveness(): void {
    if (this.livenessTimer || this.closed) return;
    this.lastHeardAtMs = performance.now();
    const period = Math.min(1000, Math.max(100, this.opts.cfg.peerSilenceMs / 4));
    this.livenessTimer = setInterval(() => void this.checkLiveness(), period);
  }

  private async checkLiveness(): Promise<void> {
    let bytes = 0;
    try {
      const report = await this.pc.getStats();
      let transports = 0;
      let pairs = 0;
      report.forEach((s: { type?: string; bytesReceived?: number }) => {
        if (s.type === 'transport') transports += s.bytesReceived ?? 0;
        else if (s.type === 'candidate-pair') pairs += s.bytesReceived ?? 0;
      });
      bytes = transports || pairs;
    } catch {
      return; // closed meanwhile
    }
    if (this.closed) return;
    const now = performance.now();
    if (bytes !== this.bytesReceived) {
      this.bytesReceived = bytes;
      this.lastHeardAtMs = now;
    } else if (now - this.lastHeardAtMs >= this.opts.cfg.peerSilenceMs) {
      this.lost(`nothing received from the peer for ${Math.round(now - this.lastHeardAtMs)} ms`);
    }
  }

  private lost(why: string): void {
    if (this.closed || this.lostReported) return;
    this.lostReported = true;
    this.opts.onLost(why);
  }
}

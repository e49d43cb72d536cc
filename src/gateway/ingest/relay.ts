import type { LegacyConfig } from '../../config';
import type { Logger } from '../../lib/logger';
import { LEGACY_ERRORS, legacyError, legacyValidationError } from '../legacy';
import type { LegacyMedia, MediaRelay, RelayStart, StreamSpec } from '../legacy';
import { checkSource } from './checks';
import type { I420Frame, RtcModule, WrtcModule } from './natives';
import { loadRtc, loadWrtc } from './natives';
import { UpstreamPublisher } from './publisher';
import { FrameSampler, relayFps } from './rate';
import { RoomJoinFailed, RoomSource } from './room-source';
import { OfferRejected, WebrtcSource } from './webrtc-source';

export interface IngestRelayOptions {
  /** `relay` (rates, ICE timing), `webrtc.iceServers` (its peer connections) and `turnServers` (echoed in webrtc create responses). */
  cfg: Pick<LegacyConfig, 'relay' | 'turnServers' | 'webrtc'>;
  logger: Logger;
  /** Module loaders (tests may count loads); default: the real packages, loaded on first use. */
  load?: { rtc?: () => Promise<RtcModule>; wrtc?: () => Promise<WrtcModule> };
}

export interface IngestStats {
  transport: 'webrtc' | 'room';
  /** Relay rate cap of this stream (frames per second). */
  fps: number;
  /** Frames decoded from the client's media / relayed into the upstream room. */
  framesIn: number;
  framesRelayed: number;
  /** Size of the last relayed frame. */
  width: number;
  height: number;
  upstreamConnected: boolean;
  upstreamReconnects: number;
}

/** One relayed stream: the client-side source, the upstream publisher and its bookkeeping. */
interface Ingest {
  streamId: string;
  transport: 'webrtc' | 'room';
  sampler: FrameSampler;
  publisher?: UpstreamPublisher;
  webrtc?: WebrtcSource;
  room?: RoomSource;
  framesIn: number;
  width: number;
  height: number;
  /** start() has returned: losses go to onLost from now on. */
  started: boolean;
  lostBeforeStart: boolean;
  lostReported: boolean;
  stopped: boolean;
  onLost: () => void;
}

/** Closes what an ingest holds; safe to repeat (each part's close is idempotent). */
async function release(ingest: Ingest): Promise<void> {
  ingest.stopped = true;
  ingest.webrtc?.close();
  await Promise.all([ingest.room?.close(), ingest.publisher?.close()]);
}

/**
 * The gateway's media relay (`MediaRelay` of LegacyStreams): for a legacy webrtc or customer-room
 * stream, decodes the client's video and publishes it into the upstream stream's room, at the rate
 * the session needs. One publisher per stream; every end path goes through `stop`. `close()` at
 * gateway shutdown stops every relay and releases rtc-node's native side (`dispose()`, which is
 * process-wide: nothing else in the process may still use rtc-node afterwards).
 */
export class IngestRelay implements MediaRelay {
  private readonly ingests = new Map<string, Ingest>();
  /** Starts in flight: close() lets them settle before rtc-node is disposed. */
  private readonly starting = new Set<Promise<unknown>>();
  private rtc: Promise<RtcModule> | undefined;
  private wrtc: Promise<WrtcModule> | undefined;
  private closed = false;

  constructor(private readonly opts: IngestRelayOptions) {}

  /** The 422 a create with this source gets, thrown before anything is set up (native: no-op). */
  check(spec: StreamSpec): void {
    checkSource(spec);
  }

  start(input: RelayStart): Promise<LegacyMedia> {
    const started = this.startRelay(input);
    this.starting.add(started);
    void started.catch(() => undefined).finally(() => this.starting.delete(started));
    return started;
  }

  private async startRelay(input: RelayStart): Promise<LegacyMedia> {
    const { spec, streamId } = input;
    const { cfg, logger } = this.opts;
    if (this.closed) throw LEGACY_ERRORS.shuttingDown();
    if (spec.transport === 'native') throw new Error('native streams have no relay');
    checkSource(spec);

    const fps = relayFps(spec, cfg.relay);
    const log = logger.child({ streamId, transport: spec.transport });
    const ingest: Ingest = {
      streamId,
      transport: spec.transport,
      sampler: new FrameSampler(fps),
      framesIn: 0,
      width: 0,
      height: 0,
      started: false,
      lostBeforeStart: false,
      lostReported: false,
      stopped: false,
      onLost: input.onLost,
    };
    // Registered before the first await, so a stop() from the session's end path always finds it.
    const previous = this.ingests.get(streamId);
    this.ingests.set(streamId, ingest);
    if (previous) await release(previous); // one publisher per stream, whatever happened before
    const lost = (why: string) => this.lose(ingest, why, log);
    const relayFrame = (frame: I420Frame) => {
      if (frame.width !== ingest.width || frame.height !== ingest.height) input.onFrameSize?.(frame.width, frame.height);
      ingest.width = frame.width;
      ingest.height = frame.height;
      ingest.publisher?.push(frame);
    };

    try {
      const rtc = await this.loadRtc();
      const publisher = new UpstreamPublisher({
        rtc,
        url: input.publishUrl,
        token: input.publishToken,
        logger: log.child({ side: 'upstream' }),
      });
      ingest.publisher = publisher;
      const upstream = publisher.connect();
      upstream.catch(() => undefined); // observed below, after the source settled
      let media: LegacyMedia;
      if (spec.source.transport === 'webrtc') {
        const wrtc = await this.loadWrtc();
        const { source, answerSdp } = await WebrtcSource.answer(spec.source.sdp, {
          wrtc,
          cfg: { ...cfg.relay, iceServers: cfg.webrtc.iceServers },
          logger: log,
          onFrame: (frame) => {
            ingest.framesIn += 1;
            if (ingest.sampler.admit(performance.now())) relayFrame(frame);
          },
          onLost: lost,
        });
        ingest.webrtc = source;
        if (ingest.stopped) source.close();
        media = { transport: 'webrtc', answerSdp, turnServers: cfg.turnServers };
      } else if (spec.source.transport === 'room') {
        ingest.room = await RoomSource.join({
          rtc,
          url: spec.source.url,
          token: spec.source.token,
          logger: log,
          onFrame: (frame) => {
            ingest.framesIn += 1;
            if (!ingest.sampler.admit(performance.now())) return;
            relayFrame(frame.type === rtc.VideoBufferType.I420 ? frame : frame.convert(rtc.VideoBufferType.I420));
          },
          onLost: lost,
        });
        if (ingest.stopped) await ingest.room.close();
        media = { transport: 'room' };
      } else {
        throw new Error(`no relay for ${spec.transport}`);
      }
      try {
        await upstream;
      } catch (err) {
        log.error({ err: (err as Error).message }, 'could not join the upstream room');
        throw legacyError(502, 'upstream_error', 'The service could not open its media room for this stream; retry later');
      }
      if (ingest.stopped) throw LEGACY_ERRORS.streamEndedDuringSetup();
      ingest.started = true;
      log.info({ fps }, 'media relay started');
      if (ingest.lostBeforeStart) this.lose(ingest, 'lost during setup', log);
      return media;
    } catch (err) {
      // Whatever was made so far, even if stop() ran meanwhile and saw less of it.
      if (this.ingests.get(streamId) === ingest) this.ingests.delete(streamId);
      await release(ingest);
      throw this.clientError(err, spec);
    }
  }

  renewToken(streamId: string, token: string): void {
    this.ingests.get(streamId)?.publisher?.renewToken(token);
  }

  async stop(streamId: string): Promise<void> {
    const ingest = this.ingests.get(streamId);
    if (!ingest) return;
    this.ingests.delete(streamId);
    await release(ingest);
  }

  /** Relay figures of one stream (undefined when it has none). */
  stats(streamId: string): IngestStats | undefined {
    const i = this.ingests.get(streamId);
    if (!i) return undefined;
    return {
      transport: i.transport,
      fps: i.sampler.fps,
      framesIn: i.framesIn,
      framesRelayed: i.publisher?.framesPublished ?? 0,
      width: i.width,
      height: i.height,
      upstreamConnected: i.publisher?.connected ?? false,
      upstreamReconnects: i.publisher?.reconnects ?? 0,
    };
  }

  get activeCount(): number {
    return this.ingests.size;
  }

  /** Ids of the streams relayed now. */
  streamIds(): string[] {
    return [...this.ingests.keys()];
  }

  /** Stops every relay, then releases rtc-node's native side if it was loaded. Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await Promise.allSettled([...this.starting]);
    await Promise.all([...this.ingests.keys()].map((id) => this.stop(id)));
    if (this.rtc) {
      const rtc = await this.rtc.catch(() => undefined);
      await rtc?.dispose();
    }
  }

  private lose(ingest: Ingest, why: string, log: Logger): void {
    if (ingest.stopped || ingest.lostReported) return;
    if (!ingest.started) {
      ingest.lostBeforeStart = true;
      return;
    }
    ingest.lostReported = true;
    log.info({ why }, 'media source lost; ending the stream');
    // Out of the native callback that noticed it: the end path closes that very peer / room.
    setImmediate(ingest.onLost);
  }

  private loadRtc(): Promise<RtcModule> {
    this.rtc ??= (this.opts.load?.rtc ?? loadRtc)();
    return this.rtc;
  }

  private loadWrtc(): Promise<WrtcModule> {
    this.wrtc ??= (this.opts.load?.wrtc ?? loadWrtc)();
    return this.wrtc;
  }

  /** Source failures the client caused → 422; everything else passes as it is. */
  private clientError(err: unknown, spec: StreamSpec): unknown {
    const field = spec.deprecatedFields.includes('webrtc') ? 'webrtc' : 'source';
    if (err instanceof OfferRejected) {
      return legacyValidationError([{ loc: ['body', field, 'sdp'], msg: err.message, type: 'value_error' }], spec.requestId, err.message);
    }
    if (err instanceof RoomJoinFailed) {
      return legacyValidationError([{ loc: ['body', 'source'], msg: err.message, type: 'value_error' }], spec.requestId, err.message);
    }
    return err;
  }
}

/**
 * The webrtc source over WHIP: the legacy client's own offer is published into the upstream
 * stream's room (`<publish url>/whip/v1`, RFC 9725, with the stream's publish token), and the room's
 * answer, with every candidate of the room, goes back in the create response. The media flows
 * client → room and never through the gateway: no media library is loaded, no socket of the
 * client's is held here, so the stream moves between replicas like a native one. The client going
 * away is read from the upstream stream's frames (./frame-watch.ts) by whichever replica owns it;
 * the session ends with a DELETE at the stream's end, from its record, on any replica.
 */
import type { WebrtcConfig } from '../../config';
import type { Logger } from '../../lib/logger';
import { offerShapeProblem, offeredVideo } from '../../lib/sdp';
import type { Clock } from '../../lib/timers';
import { WhipError, endWhip, publishWhip, whipEndpoint } from '../../lib/whip';
import type { WhipSession } from '../../lib/whip';
import { LEGACY_ERRORS, legacyValidationError } from '../legacy';
import type { MediaSessionRef, StreamSpec, SourceContext, SourceStarted, StreamSource } from '../legacy';
import { FrameWatch } from './frame-watch';

export interface WhipSourceOptions {
  cfg: Pick<WebrtcConfig, 'answerTimeoutMs' | 'frameCheckMs' | 'framesLostMs' | 'firstFrameTimeoutMs'>;
  logger: Logger;
  clock: Clock;
}

/** The request field a client's offer came in (the deprecated top-level `webrtc`, else `source`). */
const sdpField = (spec: StreamSpec) => (spec.deprecatedFields.includes('webrtc') ? 'webrtc' : 'source');

const offerError = (spec: StreamSpec, msg: string) =>
  legacyValidationError([{ loc: ['body', sdpField(spec), 'sdp'], msg, type: 'value_error' }], spec.requestId, msg);

export class WhipSource implements StreamSource {
  readonly movable = true;
  /** The frame watch of each stream this replica owns. */
  private readonly watches = new Map<string, FrameWatch>();
  /** Creates whose offer is at the room: a stop meanwhile ends the session as soon as it exists. */
  private readonly starting = new Map<string, { stopped: boolean }>();

  constructor(private readonly opts: WhipSourceOptions) {}

  /** The offer's shape only (an SDP that sends video): which codecs it may use is the room's to say. */
  check(spec: StreamSpec): void {
    if (spec.source.transport !== 'webrtc') throw new Error(`not a webrtc source: ${spec.source.transport}`);
    const problem = offerShapeProblem(spec.source.sdp);
    if (problem) throw offerError(spec, problem);
  }

  async start(ctx: SourceContext): Promise<SourceStarted> {
    const { spec, streamId } = ctx;
    this.check(spec);
    const sdp = (spec.source as { sdp: string }).sdp;
    const entry = { stopped: false };
    this.starting.set(streamId, entry);
    const log = this.opts.logger.child({ streamId, transport: 'webrtc' });
    try {
      const { url, token } = await ctx.publish();
      let endpoint: string;
      try {
        endpoint = whipEndpoint(url);
      } catch (err) {
        log.error({ err: (err as Error).message }, 'the upstream named a publish url that is no room url');
        throw LEGACY_ERRORS.roomFailed(null);
      }
      let session: WhipSession;
      try {
        session = await publishWhip(endpoint, sdp, { token, timeoutMs: this.opts.cfg.answerTimeoutMs });
      } catch (err) {
        throw this.legacyErrorOf(err, spec, log);
      }
      const release = () => this.end(session.resource, token, log);
      if (!(offeredVideo(session.answerSdp) ?? []).some((v) => v.accepted)) {
        await release();
        throw offerError(spec, "the service's media room accepted none of the offer's video");
      }
      if (entry.stopped) {
        await release();
        throw LEGACY_ERRORS.streamEndedDuringSetup();
      }
      this.watch(ctx, log);
      log.info({ iceServers: session.iceServers.length }, 'webrtc offer published into the upstream room over WHIP');
      return {
        media: {
          transport: 'webrtc',
          answerSdp: session.answerSdp,
          // The legacy shape: exactly urls, username, credential (strings).
          turnServers: session.iceServers.map((s) => ({ urls: s.urls, username: s.username ?? '', credential: s.credential ?? '' })),
        },
        session: { kind: 'whip', resource: session.resource },
      };
    } finally {
      this.starting.delete(streamId);
    }
  }

  /** Nothing to take over (the session lives in the room): the new owner watches the frames. */
  async adopt(ctx: SourceContext): Promise<void> {
    this.watch(ctx, this.opts.logger.child({ streamId: ctx.streamId, transport: 'webrtc' }));
  }

  renewToken(): void {
    // A WHIP session needs no token once published; the record keeps the latest for its DELETE.
  }

  stop(streamId: string): void {
    const entry = this.starting.get(streamId);
    if (entry) entry.stopped = true;
    this.watches.get(streamId)?.stop();
    this.watches.delete(streamId);
  }

  async release(session: MediaSessionRef, publishToken: string, streamId: string): Promise<void> {
    await this.end(session.resource, publishToken, this.opts.logger.child({ streamId, transport: 'webrtc' }));
  }

  /** Streams whose frames are watched here. */
  get watching(): number {
    return this.watches.size;
  }

  /** Stops every watch (shutdown: the streams go on elsewhere or end by their own path). */
  close(): void {
    for (const id of [...this.watches.keys()]) this.stop(id);
  }

  private watch(ctx: SourceContext, log: Logger): void {
    const { cfg, clock } = this.opts;
    this.watches.get(ctx.streamId)?.stop();
    const watch = new FrameWatch({
      read: () => ctx.readUpstream(),
      clock,
      checkMs: cfg.frameCheckMs,
      lostAfterMs: cfg.framesLostMs,
      firstFrameWithinMs: cfg.firstFrameTimeoutMs,
      onLost: (why) => {
        if (this.watches.get(ctx.streamId) !== watch) return;
        this.watches.delete(ctx.streamId);
        log.info({ why }, 'webrtc client gone (its frames stopped upstream); ending the stream');
        ctx.onLost();
      },
      onReadError: (err) => log.debug({ err: (err as Error).message }, 'frame check could not read the upstream stream'),
    });
    this.watches.set(ctx.streamId, watch);
  }

  /** DELETE of a session, best effort: a failure is logged (the upstream stream's delete takes the room down). */
  private async end(resource: string, token: string, log: Logger): Promise<void> {
    try {
      const ended = await endWhip(resource, { token, timeoutMs: this.opts.cfg.answerTimeoutMs });
      log.info({ ended }, ended ? 'WHIP session ended' : 'WHIP session was gone already');
    } catch (err) {
      log.warn({ err: (err as Error).message }, 'WHIP session could not be ended; the upstream stream delete ends it');
    }
  }

  /** A WHIP failure as the legacy client reads it; the room's own words reach the client only when its offer was refused. */
  private legacyErrorOf(err: unknown, spec: StreamSpec, log: Logger): unknown {
    if (!(err instanceof WhipError)) return err;
    const level = err.failure === 'refused' ? 'info' : 'warn';
    log[level]({ failure: err.failure, status: err.status, room: err.roomMessage }, 'the upstream room refused the WHIP offer');
    switch (err.failure) {
      case 'refused':
        return offerError(spec, `the service's media room refused the offer: ${err.roomMessage}`);
      case 'unsupported':
        return LEGACY_ERRORS.whipUnsupported(err.status ?? 404);
      case 'timeout':
        return LEGACY_ERRORS.roomTimeout();
      case 'unreachable':
        return LEGACY_ERRORS.roomUnreachable();
      default:
        return LEGACY_ERRORS.roomFailed(err.status);
    }
  }
}

import type { Room, RoomOptions, VideoSource } from '@livekit/rtc-node';
import type { Logger } from '../../lib/logger';
import type { I420Frame, RtcModule } from './natives';

/** A join (signalling + peer connection) that takes longer than this has failed. */
export const JOIN_TIMEOUT_MS = 10_000;
const RECONNECT_MIN_MS = 500;
const RECONNECT_MAX_MS = 10_000;

/** Joins with `room.connect`, giving up (and leaving) after `timeoutMs`. */
export async function joinRoom(
  room: Room,
  url: string,
  token: string,
  opts: { autoSubscribe: boolean },
  timeoutMs = JOIN_TIMEOUT_MS,
): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer from the room within ${timeoutMs} ms`)), timeoutMs);
  });
  try {
    // joinRetries 0: a failed join is final here (the publisher has its own reconnect policy, a
    // customer room refusing us is a 422); the SDK's own retry could outlive the caller's cleanup.
    const options = { autoSubscribe: opts.autoSubscribe, dynacast: false, joinRetries: 0 } as RoomOptions;
    await Promise.race([room.connect(url, token, options), timeout]);
  } catch (err) {
    await room.disconnect().catch(() => undefined);
    throw err;
  } finally {
    clearTimeout(timer);
  }
}

export interface UpstreamPublisherOptions {
  rtc: RtcModule;
  /** The upstream stream's room URL and publish token (`POST /v1beta/streams`). */
  url: string;
  token: string;
  logger: Logger;
  /** Name of the published track. */
  trackName?: string;
}

/**
 * The gateway's publisher in one upstream stream's room (`@livekit/rtc-node`): one video track fed
 * with decoded I420 frames. The track is published at the first frame (its size is known then).
 *
 * Tokens: keepalives hand over fresh publish tokens (`renewToken`); a live connection keeps going
 * without them, so the token is only used when a connection has to be made again. If the room
 * drops the connection for good (rtc-node already retries transient drops itself), the publisher
 * reconnects with the newest token, backing off, until closed; the session ends it when the
 * upstream stream is gone.
 */
export class UpstreamPublisher {
  private room: Room | undefined;
  private source: VideoSource | undefined;
  private publishing: Room | undefined;
  private token: string;
  private closed = false;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private reconnectDelayMs = RECONNECT_MIN_MS;
  /** The join in flight: close() waits for it (rtc-node must not be disposed under a pending connect). */
  private joining: Promise<void> | undefined;
  /** Frames handed to the encoder. */
  framesPublished = 0;
  reconnects = 0;

  constructor(private readonly opts: UpstreamPublisherOptions) {
    this.token = opts.token;
  }

  get connected(): boolean {
    return this.room?.isConnected ?? false;
  }

  /** First join; rejects when the upstream room cannot be joined. */
  async connect(): Promise<void> {
    await this.join();
  }

  /** Captures one frame (dropped while closed). */
  push(frame: I420Frame): void {
    if (this.closed) return;
    const { rtc } = this.opts;
    if (!this.source) {
      this.source = new rtc.VideoSource(frame.width, frame.height);
      this.publishIfReady();
    }
    this.source.captureFrame(new rtc.VideoFrame(frame.data, frame.width, frame.height, rtc.VideoBufferType.I420));
    this.framesPublished += 1;
  }

  /** Keeps the newest publish token; a connection waiting to be remade is remade now. */
  renewToken(token: string): void {
    this.token = token;
    if (this.reconnectTimer && !this.closed) {
      clearTimeout(this.reconnectTimer);
      this.reconnectTimer = undefined;
      void this.reconnect();
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.reconnectTimer);
    await this.joining?.catch(() => undefined);
    const room = this.room;
    this.room = undefined;
    await room?.disconnect().catch((err: unknown) => this.opts.logger.debug({ err }, 'upstream room disconnect failed'));
    await this.source?.close().catch(() => undefined);
    this.source = undefined;
  }

  private join(): Promise<void> {
    const joining = this.joinOnce();
    this.joining = joining;
    return joining.finally(() => {
      if (this.joining === joining) this.joining = undefined;
    });
  }

  private async joinOnce(): Promise<void> {
    const { rtc, url, logger } = this.opts;
    const room = new rtc.Room();
    room.on(rtc.RoomEvent.Disconnected, (reason) => {
      if (this.closed || room !== this.room) return;
      logger.warn({ reason: rtc.DisconnectReason[reason] ?? reason }, 'upstream room connection lost; reconnecting');
      this.room = undefined;
      this.publishing = undefined;
      this.scheduleReconnect();
    });
    this.room = room;
    try {
      await joinRoom(room, url, this.token, { autoSubscribe: false });
    } catch (err) {
      if (this.room === room) this.room = undefined;
      throw err;
    }
    if (this.closed) return; // close() waited for this join and disconnects the room
    this.reconnectDelayMs = RECONNECT_MIN_MS;
    this.publishIfReady();
  }

  private scheduleReconnect(): void {
    if (this.closed || this.reconnectTimer) return;
    const delay = this.reconnectDelayMs;
    this.reconnectDelayMs = Math.min(RECONNECT_MAX_MS, delay * 2);
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = undefined;
      void this.reconnect();
    }, delay);
  }

  private async reconnect(): Promise<void> {
    if (this.closed) return;
    this.reconnects += 1;
    try {
      await this.join();
    } catch (err) {
      this.opts.logger.warn({ err: (err as Error).message }, 'upstream room reconnect failed');
      this.scheduleReconnect();
    }
  }

  /** Publishes the track once both the room and the first frame are there (once per connection). */
  private publishIfReady(): void {
    const { rtc, logger, trackName = 'relay' } = this.opts;
    const room = this.room;
    const source = this.source;
    if (this.closed || !room?.isConnected || !source || this.publishing === room) return;
    this.publishing = room;
    const track = rtc.LocalVideoTrack.createVideoTrack(trackName, source);
    const options = new rtc.TrackPublishOptions({ source: rtc.TrackSource.SOURCE_CAMERA, simulcast: false });
    room.localParticipant!.publishTrack(track, options).catch((err: unknown) => {
      if (this.closed || room !== this.room) return;
      logger.warn({ err: (err as Error).message }, 'publishing into the upstream room failed; reconnecting');
      this.room = undefined;
      this.publishing = undefined;
      void room.disconnect().catch(() => undefined);
      this.scheduleReconnect();
    });
  }
}

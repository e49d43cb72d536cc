import { randomUUID } from 'node:crypto';
import type { EmulatorConfig } from '../config';
import { streamError, detailError } from '../lib/errors';
import type { Account } from './accounts';
import type { CameraSourceType } from './camera-sources';
import { FrameBuffer } from './frames/buffer';
import type { Stream, StreamEndReason as EndReason, StreamState } from '../lib/wire';

export type { StreamState, StreamEndReason as EndReason } from '../lib/wire';
/**
 * The Stream resource of the contract (GET /v1beta/streams/{id}); a camera-source stream also shows
 * its `source.type` and `last_pull` (the provider's camera-sources page).
 */
export type StreamView = Stream & { source?: { type: CameraSourceType }; last_pull?: number | null };

export interface EmulatedStream {
  readonly id: string;
  readonly accountId: string;
  readonly createdAtMs: number;
  readonly ttlSeconds: number;
  readonly frames: FrameBuffer;
  state: StreamState;
  expiresAtMs: number;
  endedAtMs: number | null;
  endReason: EndReason | null;
  /** Final values, taken when the stream ended (contract rule 4). */
  snapshot: StreamView | null;
  /** A camera source's type (never its url, which may carry credentials); null for a client-published stream. */
  readonly source: { type: CameraSourceType } | null;
}

export type StreamEndListener = (stream: EmulatedStream) => void;

/**
 * Streams and their leases. A stream lives `active` while keepalives come within its TTL, then
 * `ended` (expired, deleted, or reaped: no frame for `reapIdleSeconds`, when set) with its values
 * snapshotted, readable as a tombstone for `tombstoneSeconds`, then gone (404).
 */
export class StreamRegistry {
  private readonly streams = new Map<string, EmulatedStream>();
  private readonly leaseTimers = new Map<string, NodeJS.Timeout>();
  private readonly tombstoneTimers = new Map<string, NodeJS.Timeout>();
  private readonly endListeners: StreamEndListener[] = [];
  private readonly createListeners: ((s: EmulatedStream) => void)[] = [];
  private readonly now: () => number;
  private reapTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly cfg: EmulatorConfig,
    now?: () => number,
  ) {
    this.now = now ?? Date.now;
    if (cfg.reapIdleSeconds > 0) {
      // A sweep ends idle streams nobody reads (their rooms close); reads decide on their own.
      this.reapTimer = setInterval(() => this.reapIdle(), Math.min(cfg.reapIdleSeconds * 250, 30_000));
      this.reapTimer.unref();
    }
  }

  /**
   * Ends `reaped` every active stream without a frame for `reapIdleSeconds` (counted from its last
   * frame, or from its creation when none came): the provider's system cleanup of a stream whose
   * publisher left long ago. Returns how many it reaped.
   */
  reapIdle(): number {
    let n = 0;
    for (const s of this.streams.values()) {
      if (s.state !== 'active') continue;
      this.settle(s);
      if (s.endReason === 'reaped') n++;
    }
    return n;
  }

  /** When an active stream is due for reaping; undefined when reaping is off. */
  private reapAt(s: EmulatedStream): number | undefined {
    const limitMs = this.cfg.reapIdleSeconds * 1000;
    return limitMs > 0 ? (s.frames.lastFrameAtMs ?? s.createdAtMs) + limitMs : undefined;
  }

  /**
   * Ends an active stream whose lease ran out or that is due for reaping, even if the lease timer or
   * the sweep is late (a busy loop); whichever came first is the reason.
   */
  private settle(s: EmulatedStream): void {
    if (s.state !== 'active') return;
    const now = this.now();
    const reapAt = this.reapAt(s);
    if (reapAt !== undefined && now >= reapAt && reapAt <= s.expiresAtMs) this.end(s, 'reaped');
    else if (now >= s.expiresAtMs) this.end(s, 'expired');
  }

  onEnd(listener: StreamEndListener): void {
    this.endListeners.push(listener);
  }

  onCreate(listener: (s: EmulatedStream) => void): void {
    this.createListeners.push(listener);
  }

  create(account: Account, opts: { source?: { type: CameraSourceType } } = {}): EmulatedStream {
    const now = this.now();
    const ttl = this.cfg.leaseTtlSeconds;
    const stream: EmulatedStream = {
      id: randomUUID(),
      accountId: account.id,
      createdAtMs: now,
      ttlSeconds: ttl,
      frames: new FrameBuffer({
        retentionMs: this.cfg.frameRetentionSeconds * 1000,
        maxBytes: this.cfg.maxFrameBytesPerStream,
        storeWidth: this.cfg.frameStoreWidth,
        jpegQuality: this.cfg.jpegQuality,
        fpsWindowMs: this.cfg.fpsWindowMs,
        now: this.now,
      }),
      state: 'active',
      expiresAtMs: now + ttl * 1000,
      endedAtMs: null,
      endReason: null,
      snapshot: null,
      source: opts.source ? { type: opts.source.type } : null,
    };
    this.streams.set(stream.id, stream);
    this.armLease(stream);
    for (const l of this.createListeners) l(stream);
    return stream;
  }

  /** Any stream still known (active or tombstone). */
  get(id: string): EmulatedStream | undefined {
    const s = this.streams.get(id);
    if (s) this.settle(s);
    return s;
  }

  active(): EmulatedStream[] {
    return [...this.streams.values()].filter((s) => s.state === 'active');
  }

  /** The stream for a caller: 404 `stream_not_found` when unknown or gone, 403 for another account's. */
  require(id: string, account: Account): EmulatedStream {
    const s = this.get(id);
    if (!s) throw streamError(404, 'stream_not_found', `Stream ${id} not found`);
    if (s.accountId !== account.id) throw detailError(403, 'forbidden', 'This API key cannot access this stream');
    return s;
  }

  /** Renews the lease; 404 on an ended stream (streams cannot be revived). */
  keepalive(stream: EmulatedStream): void {
    if (stream.state !== 'active') {
      throw streamError(404, 'stream_not_found', `Stream ${stream.id} has ended and cannot be renewed`);
    }
    stream.expiresAtMs = this.now() + stream.ttlSeconds * 1000;
    this.armLease(stream);
  }

  /** Ends a stream once; later calls are no-ops (delete is idempotent). */
  end(stream: EmulatedStream, reason: EndReason): void {
    if (stream.state === 'ended') return;
    const now = this.now();
    clearTimeout(this.leaseTimers.get(stream.id));
    this.leaseTimers.delete(stream.id);
    stream.state = 'ended';
    stream.endedAtMs = now;
    stream.endReason = reason;
    stream.frames.seal();
    stream.snapshot = this.liveView(stream, now);
    // Retained frames are dropped either way: an ended stream can no longer be referenced.
    stream.frames.clear();
    const t = setTimeout(() => this.forget(stream.id), this.cfg.tombstoneSeconds * 1000);
    t.unref();
    this.tombstoneTimers.set(stream.id, t);
    for (const l of this.endListeners) l(stream);
  }

  private forget(id: string): void {
    this.streams.delete(id);
    this.tombstoneTimers.delete(id);
  }

  private armLease(stream: EmulatedStream): void {
    clearTimeout(this.leaseTimers.get(stream.id));
    const t = setTimeout(() => this.expireIfDue(stream), Math.max(0, stream.expiresAtMs - this.now()));
    t.unref();
    this.leaseTimers.set(stream.id, t);
  }

  /**
   * A timer may fire a little before the clock reaches the lease's end (timers and Date.now() drift
   * apart): re-arm for the rest, so an ended snapshot never predates its own expiry.
   */
  private expireIfDue(stream: EmulatedStream): void {
    if (stream.state !== 'active') return;
    if (this.now() < stream.expiresAtMs) return this.armLease(stream);
    this.end(stream, 'expired');
  }

  view(stream: EmulatedStream): StreamView {
    return stream.snapshot ?? this.liveView(stream, this.now());
  }

  private liveView(stream: EmulatedStream, now: number): StreamView {
    const f = stream.frames;
    f.evict(now);
    const ended = stream.state === 'ended';
    const oldest = f.oldestFrame;
    return {
      id: stream.id,
      state: stream.state,
      stream_time_ms: f.streamTimeMs(ended ? (stream.endedAtMs ?? now) : now),
      first_frame_at_ms: f.firstFrameAtMs,
      last_frame_at_ms: f.lastFrameAtMs,
      last_frame_index: f.lastFrameIndex,
      first_available_frame_at_ms: oldest?.capturedAtMs ?? null,
      first_available_frame_index: oldest?.index ?? null,
      created_at_ms: stream.createdAtMs,
      recent_fps: ended ? 0 : f.recentFps(now),
      retained_frame_count: f.retainedCount,
      evicted_frame_count: f.evictedCount,
      expires_at_ms: ended ? null : stream.expiresAtMs,
      ttl_seconds: stream.ttlSeconds,
      ended_at_ms: stream.endedAtMs,
      end_reason: stream.endReason,
      audio: false,
      // The synthetic publisher stands in for the pull: its newest frame is the last pull.
      ...(stream.source ? { source: { ...stream.source }, last_pull: f.lastFrameAtMs } : {}),
    };
  }

  /** Ends every stream and cancels every timer (shutdown). */
  close(): void {
    clearInterval(this.reapTimer);
    for (const s of this.streams.values()) if (s.state === 'active') this.end(s, 'deleted');
    for (const t of this.tombstoneTimers.values()) clearTimeout(t);
    this.tombstoneTimers.clear();
    this.streams.clear();
  }
}

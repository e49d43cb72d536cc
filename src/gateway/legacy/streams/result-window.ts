/**
 * Where on the stream clock the frames behind each delivered result lie, recorded for reinfer
 * (`POST /v0.2/chat/completions/clip`, ../http/reinfer.ts).
 *
 * A tick asks relative to the live edge (`start_offset_ms=-clip`, `frame_index=-1`) and the
 * completion does not say which frames it used, so the window is estimated: the upstream resolves
 * those anchors when the (last) attempt reaches it, which is when this process sent it, give or
 * take a loopback-to-datacenter hop. One stream read gives the upstream's `stream_time_ms` S; paired
 * with this process's clock at the middle of that read's round trip, L (off by at most half the
 * round trip), the stream clock at local time t is S + (t − L): the stream clock runs with wall
 * time, and only differences of this process's own clock enter, so no clock of another machine
 * (upstream or replica) has to agree with this one. The pair is the stream's own
 * (`LiveStream.clockAnchor`, a `StreamClockAnchor` below), in memory, never in the record: it lives
 * and dies with the stream, and a replica that adopts the stream reads its own. A pair read over a
 * slow round trip is replaced by a better one later (at most every `REANCHOR_MS`, `REANCHOR_TRIES`
 * times: a link that is never faster is not read again and again).
 *
 * The window is put once the result is committed (`record`); the store may write it a moment later
 * (the Redis store gathers a second's windows into one write per shard). The anchor is asked for when
 * a tick starts, so it is usually there by the commit; when it is not (a stream's first tick here),
 * the window is put once the anchor arrives. Neither holds a tick up: a failure is logged and the
 * result stays un-re-runnable (reinfer answers 404).
 */
import type { Clock } from '../../../lib/timers';
import { StoreUnavailableError } from '../../store/store';
import type { ResultWindow } from '../../store/result-windows';
import type { LiveStream } from './live-stream';
import type { LegacyRecord, StreamsContext } from './ports';

export class ResultWindowRecorder {
  constructor(private readonly deps: Pick<StreamsContext, 'store' | 'upstream' | 'cfg' | 'logger' | 'clock'>) {}

  private get clock(): Clock {
    return this.deps.clock;
  }

  /** Starts reading the stream's anchor if it has none or a poor one (a tick's start: ready by its commit). */
  prepare(stream: LiveStream): void {
    this.refresh(stream);
  }

  private get ttlMs(): number {
    return this.deps.cfg.resultWindowSeconds * 1000;
  }

  /**
   * Records the window of result `resultId` of `stream`, whose completion was sent at `sentAtMs`
   * (this process's clock), once its anchor is known (after the result's commit). Never throws.
   */
  async record(stream: LiveStream, resultId: string, sentAtMs: number): Promise<void> {
    try {
      const anchor = await this.anchorOf(stream);
      if (!anchor || stream.stopping) return;
      const window = windowAt(stream.record, anchor.streamMs + (sentAtMs - anchor.localMs));
      await this.deps.store.putResultWindow(resultId, window, this.ttlMs);
    } catch (err) {
      // A store that cannot take windows says so itself, once, not once per result.
      if (stream.stopping || err instanceof StoreUnavailableError) return;
      this.deps.logger.warn(
        { streamId: stream.record.streamId, err: err instanceof Error ? err.message : String(err) },
        'result window not recorded',
      );
    }
  }

  /** The stream's anchor; the first one is awaited, later better ones are read in the background. */
  private anchorOf(stream: LiveStream): Anchor | Promise<Anchor | undefined> | undefined {
    this.refresh(stream);
    return stream.clockAnchor.current;
  }

  /** Starts reading the stream's anchor when it has none or a poor one due for another try. */
  private refresh(stream: LiveStream): void {
    stream.clockAnchor.refresh(
      this.clock.now(),
      () => this.readAnchor(stream),
      (err) => {
        if (stream.stopping) return;
        const message = err instanceof Error ? err.message : String(err);
        this.deps.logger.warn({ streamId: stream.id, err: message }, 'stream clock not read for result windows');
      },
    );
  }

  private async readAnchor(stream: LiveStream): Promise<Anchor | undefined> {
    const sentAt = this.clock.now();
    const s = await this.deps.upstream.getStream(stream.apiKey, stream.id, { signal: stream.signal, ...stream.record.ids });
    const answeredAt = this.clock.now();
    // Before the first frame the clock stands at 0, and an ended stream's is frozen: no anchor.
    if (s.state !== 'active' || s.first_frame_at_ms === null || typeof s.stream_time_ms !== 'number') return undefined;
    return { streamMs: s.stream_time_ms, localMs: (sentAt + answeredAt) / 2, rttMs: answeredAt - sentAt };
  }
}

/** The window of a tick whose anchors the upstream resolved at stream time `endMs`. */
function windowAt(record: Pick<LegacyRecord, 'streamId' | 'accountId' | 'spec'>, endMs: number): ResultWindow {
  const end = Math.max(0, Math.round(endMs));
  const { spec } = record;
  const base = { streamId: record.streamId, accountId: record.accountId };
  return spec.mode === 'clip'
    ? { ...base, mode: 'clip', startMs: Math.max(0, end - spec.clip.clipLengthMs), endMs: end, maxFps: spec.clip.targetFps }
    : { ...base, mode: 'frame', startMs: end, endMs: end, maxFps: 0 };
}

// ── One stream's clock as this process reads it: the best (upstream stream time, local time) pair so far ──

/** A round trip under this gives an anchor good to well under one frame: kept for the stream. */
const GOOD_RTT_MS = 20;
/** How often a stream with a poorer anchor tries for a better one. */
const REANCHOR_MS = 10_000;
/** Reads of the anchor per stream at most (the first included). */
const REANCHOR_TRIES = 4;

/** The upstream's stream clock `streamMs` as it was at this process's time `localMs`. */
export interface Anchor {
  streamMs: number;
  localMs: number;
  rttMs: number;
}

export class StreamClockAnchor {
  private best?: Anchor;
  private pending?: Promise<Anchor | undefined>;
  private triedAtMs = 0;
  private tries = 0;

  /** The best anchor so far, else the read in flight (undefined: none read and none in flight). */
  get current(): Anchor | Promise<Anchor | undefined> | undefined {
    return this.best ?? this.pending;
  }

  /**
   * Starts `read` at `now` when there is no anchor, or a poor one due another try, and none is in
   * flight; its answer is kept when it beats the best so far. A failed read goes to `onError` (nobody
   * may be waiting: a background read), never unhandled.
   */
  refresh(now: number, read: () => Promise<Anchor | undefined>, onError: (err: unknown) => void): void {
    const best = this.best;
    const stale = !best || (best.rttMs > GOOD_RTT_MS && now - this.triedAtMs >= REANCHOR_MS && this.tries < REANCHOR_TRIES);
    if (!stale || this.pending) return;
    this.triedAtMs = now;
    this.tries++;
    this.pending = read()
      .then(
        (a) => {
          if (a && (!this.best || a.rttMs <= this.best.rttMs)) this.best = a;
          return this.best;
        },
        (err: unknown) => {
          onError(err);
          return this.best;
        },
      )
      .finally(() => (this.pending = undefined));
  }
}

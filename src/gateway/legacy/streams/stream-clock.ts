/**
 * One stream's clock as this process reads it, for result windows (./result-window.ts explains the
 * estimate): the best pair (upstream stream time, local time) read so far and the read in flight.
 * Each `LiveStream` owns one, so it lives and dies with the stream and never enters the record: a
 * replica that adopts the stream reads its own. A pair read over a slow round trip is replaced by a
 * better one later (at most every `REANCHOR_MS`, `REANCHOR_TRIES` times: a link that is never faster
 * is not read again and again).
 */

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

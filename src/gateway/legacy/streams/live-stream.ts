/**
 * One legacy stream running in this process, for a create and an adoption alike: this owner's copy
 * of its record, the client's key, and what lives only here (its phase, timers, ticker, the abort of
 * its upstream calls, the latest publish token, a record write-back in flight, its stream-clock
 * anchor). Its state changes only through the methods below; the registry (./registry.ts) keeps the
 * streams and nothing of theirs.
 */
import type { ValidateFunction } from 'ajv';
import { newTraceId } from '../../../lib/spans';
import type { Clock, LongTimer, TimerHandle } from '../../../lib/timers';
import { legacyThreadId } from '../contract/upstream-request';
import type { StoredMediaSession } from '../../store/store';
import { upstreamLeaseAfter } from './lease';
import type { LegacyRecord, StreamSource } from './ports';
import { StreamClockAnchor } from './result-window';
import { ownerRecord } from './stream-record';
import type { Ticker } from './ticker';

/**
 * Every kind of timer a stream here holds: each armed when it starts, created or adopted
 * (./stream-start.ts), and all stopped in `stop`. `ticks` is the first-frame poll until a first
 * frame, then the ticker.
 */
export const STREAM_TIMERS = ['leaseCheck', 'upstreamKeepalive', 'ticks'] as const;
export type StreamTimerKind = (typeof STREAM_TIMERS)[number];

/**
 * Where a stream here stands, moved only by its named transitions (./stream-start.ts starts it,
 * `stop` and the end path stop it): `creating`, a create writing its record (the owned-streams
 * reconcile leaves it be); `adopting`, an adoption taking its media over; `live`, running here;
 * `stopping`, ending or stopped (its timers and ticks act no more).
 */
export type StreamPhase = 'creating' | 'adopting' | 'live' | 'stopping';

export interface LiveStreamOptions {
  /** How it starts here: a create (its record not yet written) or an adoption. */
  origin: 'create' | 'adopt';
  /** The output schema's validator (absent: results go unchecked). */
  validate?: ValidateFunction;
  /** The publish token the upstream handed out last ('' until an adopted stream's first keepalive). */
  publishToken: string;
  /** The upstream lease's length as the upstream last told it (create or keepalive `ttl_seconds`; default: ./lease.ts). */
  upstreamLeaseSeconds?: number;
  /** Its source, told of a renewed publish token (a relay publishes with it). */
  source?: Pick<StreamSource, 'renewToken'>;
  clock: Pick<Clock, 'clearTimeout'>;
}

export class LiveStream {
  /** The client's key, held in memory only: the scheduler calls the upstream on its behalf. */
  readonly apiKey: string;
  /** The upstream conversation thread of its ticks. */
  readonly threadId: string;
  readonly validate?: ValidateFunction;
  private readonly rec: LegacyRecord;
  private readonly abort = new AbortController();
  private readonly source?: Pick<StreamSource, 'renewToken'>;
  private readonly clock: Pick<Clock, 'clearTimeout'>;
  private token: string;
  private upstreamLease: number;
  /** Its phase before it stops: where an end that could not be decided leaves it. */
  private startPhase: 'creating' | 'adopting' | 'live';
  private stoppingNow = false;
  private writingBack = false;
  /** How to cancel each timer it holds. */
  private readonly timers = new Map<StreamTimerKind, () => void>();
  private jitter?: number;
  /** Settles when the latest tick to start has committed or given up: the next one commits after it. */
  private commitTail: Promise<void> = Promise.resolve();
  /** Where its stream clock stands against this process's, for result windows (./result-window.ts); in memory only. */
  readonly clockAnchor = new StreamClockAnchor();

  constructor(rec: LegacyRecord, apiKey: string, opts: LiveStreamOptions) {
    // A copy (the store keeps its own); a record without a trace (written before tracing) gets one.
    this.rec = { ...rec, fallbackModels: [...rec.fallbackModels], ids: rec.ids.traceId ? { ...rec.ids } : { traceId: newTraceId() } };
    this.apiKey = apiKey;
    this.threadId = legacyThreadId(rec.streamId);
    this.validate = opts.validate;
    this.token = opts.publishToken;
    this.upstreamLease = upstreamLeaseAfter(opts.upstreamLeaseSeconds);
    this.source = opts.source;
    this.clock = opts.clock;
    this.startPhase = opts.origin === 'create' ? 'creating' : 'adopting';
  }

  get id(): string {
    return this.rec.streamId;
  }

  /**
   * The record as this owner knows it (the store's is the truth): what it acts and re-registers with.
   * The owner moves `epoch`, `prompt`/`promptRev`, `leaseExpiresAtMs`, `gridStartMs` and `lastTick`.
   */
  get record(): Readonly<LegacyRecord> {
    return this.rec;
  }

  get publishToken(): string {
    return this.token;
  }

  /** Aborts when the stream stops here: its upstream calls in flight end with it. */
  get signal(): AbortSignal {
    return this.abort.signal;
  }

  get phase(): StreamPhase {
    return this.stoppingNow ? 'stopping' : this.startPhase;
  }

  /** True once it stops here (ended, fenced, handed over): its timers and ticks act no more. */
  get stopping(): boolean {
    return this.stoppingNow;
  }

  // ── Starting (./stream-start.ts) ──

  /** Its record is written (a create) or its media taken over (an adoption): it runs here. A stream stopping stays stopping. */
  started(): void {
    this.startPhase = 'live';
  }

  // ── The record, as its owner moves it ──

  /** A fresh publish token from the upstream keepalive, handed to the source (a relay publishes with it). */
  renewToken(token: string): void {
    this.token = token;
    this.source?.renewToken(this.id, token);
  }

  /** The upstream lease's length (s), as the upstream last told it: its renewals are timed from it (./lease.ts). */
  get upstreamLeaseSeconds(): number {
    return this.upstreamLease;
  }

  /** An upstream keepalive answered; its `ttl_seconds` (when it gave one) is the lease from now on. */
  upstreamLeaseRenewed(ttlSeconds: number | undefined): void {
    this.upstreamLease = upstreamLeaseAfter(ttlSeconds, this.upstreamLease);
  }

  /** Its media session outside this process (a WHIP session), as the record keeps it: a record written back from here keeps it too. */
  holdMediaSession(session: StoredMediaSession): void {
    this.rec.mediaSession = { ...session };
  }

  /** A prompt the store took (a PATCH here or on another replica): the next tick asks with it. */
  adoptPrompt(prompt: string, promptRev: number): void {
    this.rec.prompt = prompt;
    this.rec.promptRev = promptRev;
  }

  extendLease(expiresAtMs: number): void {
    this.rec.leaseExpiresAtMs = expiresAtMs;
  }

  /** A new epoch for writing the record back: commits under the old one are refused from now on. */
  bumpEpoch(): void {
    this.rec.epoch += 1;
  }

  /** The epoch the store holds for this owner (it wrote the record back first). */
  takeEpoch(epoch: number): void {
    this.rec.epoch = epoch;
  }

  /** Tick `tick` was committed: a successor resumes after it. */
  committed(tick: number): void {
    this.rec.lastTick = Math.max(this.rec.lastTick, tick);
  }

  /** Where its tick grid starts, set once (true when this call set it: the store is told). */
  anchorGrid(gridStartMs: number): boolean {
    if (this.rec.gridStartMs !== null) return false;
    this.rec.gridStartMs = gridStartMs;
    return true;
  }

  /** The store record of this stream as its owner `owner` knows it (create, and writing a lost record back). */
  toRecord(owner: string, now: number): LegacyRecord {
    return ownerRecord(this.rec, owner, now);
  }

  /**
   * A tick's place in the commit order, taken when it starts (ticks start in tick order): `before`
   * settles once every earlier tick committed or gave up, so results reach the sockets in tick order
   * however the completions overlap; `done()` (always called, on every path) lets the next one go.
   */
  commitTurn(): { before: Promise<void>; done(): void } {
    const before = this.commitTail;
    let done!: () => void;
    this.commitTail = new Promise<void>((resolve) => (done = resolve));
    return { before, done };
  }

  /** Where it resumes in the spread after its key's rate-limit hold (0..1, drawn once by `draw`). */
  backoffJitter(draw: () => number): number {
    this.jitter ??= draw();
    return this.jitter;
  }

  // ── Its timers (`STREAM_TIMERS`): each replaces the one of its kind before it ──

  setLeaseCheck(timer: LongTimer): void {
    this.hold('leaseCheck', () => timer.clear());
  }

  setUpstreamKeepalive(timer: LongTimer): void {
    this.hold('upstreamKeepalive', () => timer.clear());
  }

  setFirstFramePoll(handle: TimerHandle): void {
    this.hold('ticks', () => this.clock.clearTimeout(handle));
  }

  /** Ticks with `ticker` from tick `firstN` of the grid starting at `gridStartMs` (the first-frame poll is done). */
  startTicking(ticker: Ticker, gridStartMs: number, firstN: number): void {
    this.hold('ticks', () => ticker.stop());
    ticker.start(gridStartMs, firstN);
  }

  /** The kinds of timer it holds (armed, or fired and not armed again); none once stopped. */
  get timerKinds(): StreamTimerKind[] {
    return [...this.timers.keys()];
  }

  private hold(kind: StreamTimerKind, cancel: () => void): void {
    this.timers.get(kind)?.();
    this.timers.set(kind, cancel);
  }

  // ── Writing its record back (the store lost it: ./record-sync.ts) ──

  /** Claims the write-back: false when one is in flight already (a commit's answer and the reconcile may both ask). */
  beginWriteBack(): boolean {
    if (this.writingBack) return false;
    this.writingBack = true;
    return true;
  }

  endWriteBack(): void {
    this.writingBack = false;
  }

  // ── Stopping ──

  /** Claims the stop for an end in progress: false when it is stopping already. */
  beginEnd(): boolean {
    if (this.stoppingNow) return false;
    this.stoppingNow = true;
    return true;
  }

  /** The end could not be decided (the store did not answer): the stream runs on, in the phase it was in. */
  cancelEnd(): void {
    this.stoppingNow = false;
  }

  /** Stops everything of it here: ticker, timers, upstream calls in flight. Idempotent. */
  stop(): void {
    this.stoppingNow = true;
    for (const cancel of this.timers.values()) cancel();
    this.timers.clear();
    this.abort.abort();
  }
}

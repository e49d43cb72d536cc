/**
 * The replica's media relay, run in a supervised child process (./media-worker.ts): the
 * `MediaRelay` of the customer-room source and of webrtc in relay mode, with no native media
 * library loaded in the replica itself. The worker is forked on the first relay (a replica that
 * never relays never forks one).
 *
 * Supervision: the worker's death (any signal, any exit) is noticed at once; the replica keeps every
 * socket. The worker is forked again after a backoff (`restartMinMs` doubling to `restartMaxMs`),
 * and the customer-room relays it carried start again in it (the customer's token is in the
 * request kept here, the newest publish token too); a relayed webrtc peer cannot be re-made, so its
 * stream ends `webrtc_disconnected`, as does a room relay that cannot start again. A worker that
 * dies more than `maxRestartsPerMinute` times in a minute is not forked again for
 * `failedCooldownMs`: its streams end, creates that need it get 503 `media_unavailable`, and the
 * replica reports it (`health().state` `failed`, /readyz 503, so the balancer sends its traffic
 * elsewhere); after the cool-down the next relay forks a worker again. A worker silent for `stallMs` (its
 * figures come every second) is SIGKILLed and restarted the same way; a relay whose upstream
 * publisher stays disconnected for `relayStallMs` is ended rather than left half-alive.
 *
 * Recycling: rtc-node keeps native memory of every room it joined and left (livekit/node-sdks#514,
 * ~0.4–0.8 MiB a room here), so a worker whose RSS passes `recycleRssMb` is replaced while it
 * carries no relayed webrtc peer (those could not move): it closes, a new one is forked at once and
 * takes its customer-room relays over (each resumes within the time a room join takes); a start in
 * flight in the old one is made again in the new one, so a create never sees the recycle.
 */
import type { LegacyConfig } from '../../config';
import type { Logger } from '../../lib/logger';
import { realClock } from '../../lib/timers';
import type { Clock, TimerHandle } from '../../lib/timers';
import { LEGACY_ERRORS } from '../legacy';
import type { LegacyMedia, MediaRelay, RelayStart, StreamSpec } from '../legacy';
import { checkSource } from './checks';
import { MediaWorkerProcess, WorkerGone } from './worker-process';
import type { WorkerEvent } from './worker-process';
import type { RelayRequest } from './worker-protocol';

export type MediaWorkerState = 'idle' | 'starting' | 'up' | 'restarting' | 'failed' | 'closed';

/** Why a worker was forked again: it died (a signal, an exit), stalled, or grew past its memory bound. */
export type RestartReason = 'signal' | 'exit' | 'stall' | 'recycle';

export interface MediaWorkerHealth {
  state: MediaWorkerState;
  pid: number | undefined;
  /** Restarts since this replica started. */
  restarts: number;
  /** The worker's own figures, as of its last report (0 before the first). */
  rssBytes: number;
  heapUsedBytes: number;
  cpuSeconds: number;
  relays: number;
}

export interface WorkerRelayOptions {
  cfg: Pick<LegacyConfig, 'relay' | 'turnServers' | 'webrtc' | 'mediaWorker'>;
  logger: Logger;
  /** The worker's log level (the replica's). */
  logLevel: string;
  /** The worker's script and node options (tests run a bundle; default: media-worker.js beside this module). */
  script?: string;
  execArgv?: string[];
  /** Told of every restart (metrics). */
  onRestart?(reason: RestartReason): void;
  /** Times the supervision (backoff, restart budget, cool-down, relay stalls); the stall watchdog runs on real time, as the worker's reports do. */
  clock?: Clock;
}

/** One relayed stream as the replica keeps it: enough to start it again in a new worker. */
interface Relayed {
  request: RelayRequest;
  onLost: () => void;
  onFrameSize?: (width: number, height: number) => void;
  /** The worker answered its start (a start in flight is the create's to fail). */
  started: boolean;
  /** Since when its upstream publisher has been reported disconnected (undefined: connected). */
  disconnectedSinceMs?: number;
}

export class WorkerRelay implements MediaRelay {
  private worker: MediaWorkerProcess | undefined;
  private state: MediaWorkerState = 'idle';
  private readonly relays = new Map<string, Relayed>();
  /** When the worker died, within the last minute (the restart budget). */
  private deaths: number[] = [];
  private restarts = 0;
  private backoffMs: number;
  private restartTimer: TimerHandle | undefined;
  private cooldownTimer: TimerHandle | undefined;
  /** When a worker given up on may be forked again. */
  private cooldownEndsAtMs = 0;
  private watchdog: NodeJS.Timeout | undefined;
  /** The worker being forked (starts wait for it). */
  private forking: Promise<MediaWorkerProcess> | undefined;
  private figures = { rssBytes: 0, heapUsedBytes: 0, cpuSeconds: 0 };
  /** The worker the watchdog killed (its exit is a stall, not a crash). */
  private stalled: MediaWorkerProcess | undefined;
  /** Workers replaced for their memory (a start in flight in one goes on in its successor). */
  private readonly retired = new WeakSet<MediaWorkerProcess>();
  private readonly log: Logger;
  private readonly clock: Clock;

  constructor(private readonly opts: WorkerRelayOptions) {
    this.clock = opts.clock ?? realClock;
    this.backoffMs = opts.cfg.mediaWorker.restartMinMs;
    this.log = opts.logger.child({ component: 'media-worker' });
  }

  /** 503 `media_unavailable`, its retry-after the rest of the cool-down when the worker is given up on. */
  private unavailable() {
    const left = this.state === 'failed' ? (this.cooldownEndsAtMs - this.clock.now()) / 1000 : 1;
    return LEGACY_ERRORS.mediaUnavailable(left);
  }

  /** The relay's 422s, decided here (pure checks: no native code needed). */
  check(spec: StreamSpec): void {
    checkSource(spec);
  }

  get activeCount(): number {
    return this.relays.size;
  }

  health(): MediaWorkerHealth {
    return { state: this.state, pid: this.worker?.pid, restarts: this.restarts, ...this.figures, relays: this.relays.size };
  }

  async start(input: RelayStart): Promise<LegacyMedia> {
    if (this.state === 'closed') throw LEGACY_ERRORS.shuttingDown();
    if (this.state === 'failed') throw this.unavailable();
    this.check(input.spec);
    const request: RelayRequest = {
      spec: input.spec,
      streamId: input.streamId,
      publishUrl: input.publishUrl,
      publishToken: input.publishToken,
    };
    const entry: Relayed = { request, onLost: input.onLost, onFrameSize: input.onFrameSize, started: false };
    this.relays.set(input.streamId, entry);
    try {
      const { worker, media } = await this.startInWorker(entry);
      if (this.relays.get(input.streamId) !== entry) {
        // Stopped while it started: release it in the worker.
        await worker.stop(input.streamId).catch(() => undefined);
        throw LEGACY_ERRORS.streamEndedDuringSetup();
      }
      entry.started = true;
      return media;
    } catch (err) {
      if (this.relays.get(input.streamId) === entry) this.relays.delete(input.streamId);
      if (err instanceof WorkerGone) throw this.unavailable();
      throw err;
    }
  }

  /**
   * Starts `entry`'s relay in the running worker. A worker replaced for its memory while the start
   * was in flight hands it to its successor (the start is made again there); a death fails it.
   */
  private async startInWorker(entry: Relayed): Promise<{ worker: MediaWorkerProcess; media: LegacyMedia }> {
    for (;;) {
      if (this.state === 'closed') throw LEGACY_ERRORS.shuttingDown();
      const worker = await this.up();
      try {
        return { worker, media: await worker.start(entry.request) };
      } catch (err) {
        if (!(err instanceof WorkerGone) || !this.retired.has(worker) || this.relays.get(entry.request.streamId) !== entry) throw err;
      }
    }
  }

  renewToken(streamId: string, token: string): void {
    const entry = this.relays.get(streamId);
    if (!entry) return;
    entry.request = { ...entry.request, publishToken: token };
    this.worker?.renew(streamId, token);
  }

  async stop(streamId: string): Promise<void> {
    if (!this.relays.delete(streamId)) return;
    await this.worker?.stop(streamId).catch(() => undefined);
  }

  /** Stops every relay and the worker (gateway shutdown). Idempotent. */
  async close(): Promise<void> {
    if (this.state === 'closed') return;
    this.state = 'closed';
    this.clock.clearTimeout(this.restartTimer);
    this.clock.clearTimeout(this.cooldownTimer);
    clearInterval(this.watchdog);
    this.relays.clear();
    await this.forking?.catch(() => undefined);
    await this.worker?.close();
  }

  /** The running worker, forked when there is none. */
  private up(): Promise<MediaWorkerProcess> {
    if (this.worker?.alive && this.state === 'up') return Promise.resolve(this.worker);
    if (this.state === 'failed') return Promise.reject(this.unavailable());
    this.forking ??= this.fork().finally(() => (this.forking = undefined));
    return this.forking;
  }

  private async fork(): Promise<MediaWorkerProcess> {
    if (this.state !== 'restarting') this.state = 'starting';
    const { cfg, logLevel } = this.opts;
    // Events of a worker that is no longer the current one (recycled, dead) are not its relays' any more.
    const self: { worker?: MediaWorkerProcess } = {};
    let worker: MediaWorkerProcess;
    try {
      worker = new MediaWorkerProcess(
        {
          script: this.opts.script,
          execArgv: this.opts.execArgv,
          init: { op: 'init', cfg: { relay: cfg.relay, turnServers: cfg.turnServers, webrtc: cfg.webrtc }, logLevel },
        },
        (e) => {
          if (self.worker === this.worker) this.onEvent(e);
        },
      );
    } catch (err) {
      // Nothing was forked (no script): the next relay tries again.
      this.state = 'idle';
      this.log.error({ err: err instanceof Error ? err.message : String(err) }, 'media worker could not be forked');
      throw err;
    }
    self.worker = worker;
    this.worker = worker;
    void worker.exited.then(({ code, signal }) => this.onExit(worker, code, signal));
    await worker.ready;
    // close() may have run while the worker came up (the compiler cannot see it from here).
    if ((this.state as MediaWorkerState) === 'closed') throw LEGACY_ERRORS.shuttingDown();
    this.state = 'up';
    this.watch(worker);
    this.log.info({ pid: worker.pid }, 'media worker started');
    return worker;
  }

  /** A worker silent for `stallMs` is stuck: SIGKILLed, then restarted as after any death. */
  private watch(worker: MediaWorkerProcess): void {
    clearInterval(this.watchdog);
    const { stallMs } = this.opts.cfg.mediaWorker;
    this.watchdog = setInterval(
      () => {
        if (this.worker !== worker || !worker.alive) return;
        const silentMs = Date.now() - worker.lastHeardAtMs;
        if (silentMs < stallMs) return;
        this.log.error({ pid: worker.pid, silentMs }, 'media worker stalled: killing it');
        this.stalled = worker;
        worker.kill('SIGKILL');
      },
      Math.min(1000, stallMs),
    );
    this.watchdog.unref();
  }

  private onEvent(e: WorkerEvent): void {
    if (e.op === 'lost') return this.lose(e.streamId, 'its media source was lost');
    if (e.op === 'frameSize') return this.relays.get(e.streamId)?.onFrameSize?.(e.width, e.height);
    this.figures = { rssBytes: e.rssBytes, heapUsedBytes: e.heapUsedBytes, cpuSeconds: e.cpuMicros / 1e6 };
    const recycleAt = this.opts.cfg.mediaWorker.recycleRssMb * 1024 * 1024;
    if (recycleAt > 0 && e.rssBytes > recycleAt && this.worker && this.state === 'up' && !this.carriesPeers()) {
      void this.recycle(this.worker, e.rssBytes);
    }
    const now = this.clock.now();
    for (const s of e.streams) {
      const entry = this.relays.get(s.streamId);
      if (!entry?.started) continue;
      if (s.upstreamConnected) entry.disconnectedSinceMs = undefined;
      else entry.disconnectedSinceMs ??= now;
      if (entry.disconnectedSinceMs !== undefined && now - entry.disconnectedSinceMs >= this.opts.cfg.mediaWorker.relayStallMs) {
        this.lose(s.streamId, `its upstream publisher has been disconnected for ${now - entry.disconnectedSinceMs} ms`);
      }
    }
  }

  /** A stream whose media is gone: it leaves the relay and its session ends it. */
  private lose(streamId: string, why: string): void {
    const entry = this.relays.get(streamId);
    if (!entry) return;
    this.relays.delete(streamId);
    this.log.info({ streamId, why }, 'relayed stream lost');
    // Out of the event that noticed it: the end path stops this very relay.
    setImmediate(entry.onLost);
  }

  private onExit(worker: MediaWorkerProcess, code: number | null, signal: NodeJS.Signals | null): void {
    if (this.worker !== worker || this.state === 'closed') return;
    clearInterval(this.watchdog);
    const reason: RestartReason = this.stalled === worker ? 'stall' : signal ? 'signal' : 'exit';
    const now = this.clock.now();
    this.deaths = [...this.deaths.filter((t) => now - t < 60_000), now];
    this.log.error({ pid: worker.pid, code, signal, reason, relays: this.relays.size }, 'media worker died');
    this.worker = undefined;
    this.figures = { rssBytes: 0, heapUsedBytes: 0, cpuSeconds: 0 };
    // A relayed peer connection died with it; starts in flight fail their creates (WorkerGone).
    for (const [id, entry] of [...this.relays]) {
      if (entry.started && entry.request.spec.transport === 'webrtc') this.lose(id, 'the media worker died with its peer connection');
    }
    if (this.deaths.length > this.opts.cfg.mediaWorker.maxRestartsPerMinute) {
      this.state = 'failed';
      const { failedCooldownMs } = this.opts.cfg.mediaWorker;
      this.cooldownEndsAtMs = now + failedCooldownMs;
      this.log.error(
        { deaths: this.deaths.length, cooldownMs: failedCooldownMs },
        'media worker died too often: not restarted for a while; relayed streams end',
      );
      for (const id of [...this.relays.keys()]) this.lose(id, 'the media worker died too often');
      // Half-open after the cool-down: the next relay forks a worker, with a fresh budget.
      this.cooldownTimer = this.clock.setTimeout(() => {
        if (this.state !== 'failed') return;
        this.state = 'idle';
        this.deaths = [];
        this.backoffMs = this.opts.cfg.mediaWorker.restartMinMs;
        this.log.info('media worker cool-down over: the next relay forks one');
      }, failedCooldownMs);
      this.cooldownTimer.unref?.();
      return;
    }
    this.state = 'restarting';
    const delay = this.backoffMs;
    this.backoffMs = Math.min(this.backoffMs * 2, this.opts.cfg.mediaWorker.restartMaxMs);
    this.restartTimer = this.clock.setTimeout(() => void this.restart(reason), delay);
    this.restartTimer.unref?.();
  }

  /** Whether a relayed webrtc peer runs in the worker (a recycle would end it). */
  private carriesPeers(): boolean {
    return [...this.relays.values()].some((e) => e.request.spec.transport === 'webrtc');
  }

  /** Replaces a worker grown past its memory bound: it releases everything, a new one takes its relays over. */
  private async recycle(old: MediaWorkerProcess, rssBytes: number): Promise<void> {
    this.state = 'restarting';
    clearInterval(this.watchdog);
    this.retired.add(old);
    this.worker = undefined; // its exit is a recycle, not a death
    this.log.info(
      { pid: old.pid, rssMb: Math.round(rssBytes / 1048576), limitMb: this.opts.cfg.mediaWorker.recycleRssMb },
      'media worker past its memory bound: replacing it',
    );
    await old.close();
    await this.restart('recycle');
  }

  /** Forks a new worker and starts again the room relays the previous one carried. */
  private async restart(reason: RestartReason): Promise<void> {
    if (this.state === 'closed') return;
    this.restarts++;
    this.opts.onRestart?.(reason);
    let worker: MediaWorkerProcess;
    try {
      worker = await this.up();
    } catch (err) {
      this.log.error({ err }, 'media worker could not be started again');
      return; // its exit handler (or the next start) decides what comes next
    }
    const carried = [...this.relays].filter(([, e]) => e.started);
    this.log.info({ pid: worker.pid, relays: carried.length, reason }, 'media worker restarted');
    await Promise.all(
      carried.map(async ([id, entry]) => {
        try {
          await worker.start(entry.request);
          if (this.relays.get(id) !== entry) await worker.stop(id).catch(() => undefined);
        } catch (err) {
          // The new worker died too: the relay stays carried, and the next worker starts it (or the
          // restart budget ends it). Only a start the worker itself refused ends the stream.
          if (err instanceof WorkerGone) return;
          this.log.warn({ streamId: id, err: err instanceof Error ? err.message : String(err) }, 'relay could not start again');
          this.lose(id, 'its relay could not start again in the new media worker');
        }
      }),
    );
    // A worker that stays up earns its backoff back.
    const steady = this.clock.setTimeout(() => {
      if (this.worker === worker && worker.alive) this.backoffMs = this.opts.cfg.mediaWorker.restartMinMs;
    }, 60_000);
    steady.unref?.();
  }
}

/**
 * The gateway's shutdown: its steps, one per lifecycle state (./lifecycle.ts), each moving the
 * lifecycle on and doing what the state means (`gatewayShutdown`); and when they run, each within
 * its time (`shutdownControl`): the drain (./drain.ts), then the close.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Config } from '../config';
import type { Logger } from '../lib/logger';
import { realClock } from '../lib/timers';
import type { Clock } from '../lib/timers';
import type { UpstreamClient } from '../upstream/client';
import type { Gateway } from './app';
import { drain } from './drain';
import type { FleetMember } from './fleet/member';
import type { IngestRelay } from './ingest';
import { LEGACY_CLOSES } from './legacy';
import type { LegacyStreams, ResultsSockets, StreamSources } from './legacy';
import type { Lifecycle } from './lifecycle';
import type { GatewayListeners } from './listeners';
import type { Passthrough } from './passthrough';
import type { Store } from './store/store';
import type { GatewayTelemetry } from './telemetry/gateway-telemetry';
import { utcDay } from './telemetry/usage';

export interface GatewayShutdown {
  /** `unready`: /readyz answers 503 while everything else keeps serving (the wait before the drain or the close). */
  markUnready(): void;
  /**
   * The drain (a fleet replica's SIGTERM), `holding` once the fleet has marked it draining: no new
   * legacy streams here, streams whose media does not live here go to replicas not draining, and
   * this replica stays a fleet member so its results sockets and media relays keep working until
   * they end. False (nothing held) when solo or the last replica alive: nobody could take the
   * streams, so they end as on any shutdown.
   */
  holdConnections(): Promise<boolean>;
  /** What a holding replica still holds: open results sockets and running media relays. */
  held(): { sockets: number; relays: number };
  /**
   * `leaving`: legacy creates and new results sockets are refused; in a fleet with replicas alive that
   * are not draining, live legacy streams are handed over to them (webrtc ones end); otherwise they
   * end (sockets close with 1001 `server_shutdown`, upstream streams deleted).
   */
  handOverOrEnd(why?: string): Promise<void>;
  /** `closed`: ends what is left (sockets close), flushes telemetry, releases everything. */
  close(): Promise<void>;
}

export interface ShutdownParts {
  streams: Pick<LegacyStreams, 'closeAll'>;
  fleet: FleetMember;
  sockets: Pick<ResultsSockets, 'connections' | 'close'>;
  /** The media sources (what they hold here is held; closed here); `ingest`: the gateway's own relay, closed here. */
  sources?: Pick<StreamSources, 'held' | 'close'>;
  ingest?: Pick<IngestRelay, 'close'>;
  telemetry: Pick<GatewayTelemetry, 'upstreamHealth' | 'rollup' | 'sunset' | 'usage'>;
  upstream: Pick<UpstreamClient, 'close'>;
  passthrough: Pick<Passthrough, 'close'>;
  /** The passthrough's batched request telemetry: from the close on, each request's runs at once. */
  passthroughSettled?: { close(): void };
  /** The store when the gateway made it (closed last); an injected one is closed by its owner. */
  ownStore?: Pick<Store, 'close'>;
  clock?: Clock;
}

export function gatewayShutdown(lifecycle: Lifecycle, parts: ShutdownParts): GatewayShutdown {
  const { streams, fleet, sockets, telemetry } = parts;
  /**
   * The hand-over moved this replica's streams to others: their sockets close so that clients
   * reconnect. How leaving went, not a state: `leaving` is the same whether streams moved or ended.
   */
  let handedOver = false;
  /** Streams this replica ended on its way out (`server_shutdown`): their sockets say so, not 1012. */
  const endedHere = new Set<string>();
  const endAll = async () => {
    for (const id of await streams.closeAll()) endedHere.add(id);
  };
  let closing: Promise<void> | undefined;

  return {
    markUnready() {
      lifecycle.advance('unready');
    },
    async holdConnections() {
      lifecycle.advance('unready');
      lifecycle.advance('holding');
      return fleet.beginDrain();
    },
    held: () => ({ sockets: sockets.connections, relays: parts.sources?.held ?? 0 }),
    async handOverOrEnd(why?: string) {
      lifecycle.advance('leaving');
      // Handed-over streams leave this replica; what is left (webrtc, or no other replica) ends.
      handedOver = await fleet.handOver(why);
      await endAll();
    },
    close() {
      closing ??= (async () => {
        lifecycle.advance('closed');
        // Requests cut from here on settle with no timer left to write their lines before the exit.
        parts.passthroughSettled?.close();
        telemetry.upstreamHealth.stop();
        await fleet.stop();
        await endAll();
        await parts.sources?.close();
        await parts.ingest?.close();
        await sockets.close(handedOver ? LEGACY_CLOSES.replicaLeaving : undefined, endedHere);
        await telemetry.rollup.stop();
        await telemetry.sunset.close();
        await telemetry.usage.close();
        // The day so far, so a restart never loses the last summary.
        await telemetry.rollup.run(utcDay((parts.clock ?? realClock).now()), { partial: true });
        await parts.upstream.close();
        parts.passthrough.close();
        await parts.ownStore?.close();
      })();
      return closing;
    },
  };
}

/** When the steps run (server.ts's `RunningGateway` offers these). */
export interface ShutdownControl {
  /**
   * Graceful shutdown, finished within `graceMs` (default `shutdownGraceMs`): first `shutdownDelayMs`
   * (at most half the grace period) `unready`, then stop accepting connections, hand over or end
   * legacy streams (`leaving`; ended streams' results sockets close with 1001), let requests in
   * flight finish, release everything (`closed`), then cut whatever is left.
   */
  close(graceMs?: number): Promise<void>;
  /**
   * A fleet replica's SIGTERM (docs/scaling.md "Deploys"): `unready` at once; after
   * `shutdownDelayMs` the drain (`holding`): no new legacy streams here, movable streams handed to
   * replicas not draining, idle connections closed; open results sockets and media relays are kept,
   * serving, until none is left or `drainMs` (`server.drainTimeoutMs`) has passed or `hurry()` is
   * called; then `close(graceMs)`. A solo replica skips the drain: nobody could take the streams over.
   */
  drainAndClose(drainMs?: number, graceMs?: number): Promise<void>;
  /** Ends the drain now (a second signal): what is left is handed over or ended by `close`. */
  hurry(): void;
}

export interface ShutdownTiming {
  cfg: Pick<Config, 'shutdownDelayMs' | 'shutdownGraceMs' | 'server'>;
  logger: Logger;
  /** How the shutdown waits out `shutdownDelayMs` (tests resolve it themselves). */
  delay: (ms: number) => Promise<unknown>;
}

/** What the drain and the close share. */
export interface ShutdownRun {
  gateway: Gateway;
  listeners: GatewayListeners;
  logger: Logger;
  shutdownDelayMs: number;
  /**
   * `unready` for `delayMs`, or until hurried: load balancers notice /readyz 503 only at their next
   * probe. `next`: the state that follows, as the log names it.
   */
  serveUnready(delayMs: number, log: Logger, next: 'holding' | 'leaving'): Promise<void>;
  /** Aborted by a second signal; `hurried` settles then. */
  hurry: AbortSignal;
  hurried: Promise<void>;
}

/** The shutdown of a listening gateway: the drain and the close, each started once. */
export function shutdownControl(gateway: Gateway, listeners: GatewayListeners, { cfg, logger, delay }: ShutdownTiming): ShutdownControl {
  const hurry = new AbortController();
  const hurried = new Promise<void>((resolve) => hurry.signal.addEventListener('abort', () => resolve(), { once: true }));
  const run: ShutdownRun = {
    gateway,
    listeners,
    logger,
    shutdownDelayMs: cfg.shutdownDelayMs,
    async serveUnready(delayMs, log, next) {
      if (delayMs <= 0) return;
      log.info({ delayMs }, `unready: serving ${delayMs} ms more before ${next}`);
      await Promise.race([delay(delayMs), hurried]);
    },
    hurry: hurry.signal,
    hurried,
  };
  let closing: Promise<void> | undefined;
  let draining: Promise<void> | undefined;
  /** `afterDrain`: a drain already waited out `shutdownDelayMs` (and why it ended). */
  const close = (graceMs: number, afterDrain?: { why?: string }) => (closing ??= leaveAndClose(run, graceMs, afterDrain));
  return {
    close: (graceMs = cfg.shutdownGraceMs) => close(graceMs),
    drainAndClose(drainMs = cfg.server.drainTimeoutMs, graceMs = cfg.shutdownGraceMs) {
      if (gateway.fleet.solo) return close(graceMs);
      draining ??= drain(run, drainMs).then((why) => close(graceMs, { why }));
      return draining;
    },
    hurry: () => hurry.abort(),
  };
}

/**
 * The close within `graceMs`: `unready` for `shutdownDelayMs` unless a drain came first, then
 * `leaving` (no new connections; streams handed over or ended) while requests in flight finish,
 * then `closed` (resources released), then whatever is left is cut.
 */
async function leaveAndClose(run: ShutdownRun, graceMs: number, afterDrain: { why?: string } | undefined): Promise<void> {
  const { gateway, listeners } = run;
  const started = Date.now();
  const deadline = started + graceMs;
  const log = run.logger.child({ component: 'shutdown' });
  if (!afterDrain) {
    gateway.markUnready();
    await run.serveUnready(Math.min(run.shutdownDelayMs, graceMs / 2), log, 'leaving');
  }
  // Leave a slice of the grace period for the final close after waiting on requests in flight.
  const waitUntil = deadline - Math.min(1000, (deadline - Date.now()) / 4);
  const serverClosed = listeners.stopAccepting();
  listeners.closeIdle();
  const streams = gateway.streams.activeCount;
  log.info(
    { graceMs, legacyStreams: streams, inFlight: gateway.inFlight },
    `leaving: ${streams} legacy streams to hand over (fleet) or end`,
  );
  if (!(await within(gateway.handOverOrEnd(afterDrain?.why), waitUntil - Date.now(), log)))
    log.warn('legacy streams did not all end in time');
  await requestsInFlight(run, waitUntil, log);
  listeners.cutRequests();
  if (!(await within(gateway.close(), deadline - Date.now(), log))) log.warn('gateway resources did not close in time');
  listeners.cutAll();
  await within(serverClosed, deadline - Date.now(), log);
  await within(listeners.closeMetrics(), deadline - Date.now(), log);
  log.info({ ms: Date.now() - started }, `gateway closed in ${Date.now() - started} ms`);
}

/** Waits for the requests in flight until `waitUntil` (idle connections closed as they free up). */
async function requestsInFlight({ gateway, listeners }: ShutdownRun, waitUntil: number, log: Logger): Promise<void> {
  let reported = -1;
  while (gateway.inFlight > 0 && Date.now() < waitUntil) {
    if (gateway.inFlight !== reported) {
      reported = gateway.inFlight;
      log.info({ inFlight: reported, leftMs: waitUntil - Date.now() }, `waiting for ${reported} requests in flight`);
    }
    listeners.closeIdle();
    await sleep(25);
  }
  if (gateway.inFlight > 0) log.warn({ inFlight: gateway.inFlight }, 'grace period over: cutting requests still in flight');
}

/** True once `p` settles, false if `ms` pass first (a rejection is logged, not thrown: shutdown goes on). */
async function within(p: Promise<unknown>, ms: number, log: Logger): Promise<boolean> {
  const timer = new AbortController();
  const settled = p.then(
    () => true,
    (err: unknown) => {
      log.warn({ err }, 'shutdown step failed');
      return true;
    },
  );
  try {
    return await Promise.race([settled, sleep(Math.max(0, ms), false, { signal: timer.signal })]);
  } finally {
    timer.abort();
  }
}

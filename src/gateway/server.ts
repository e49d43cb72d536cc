import type http from 'node:http';
import type { Duplex } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { settingOf } from '../config';
import type { Config } from '../config';
import { createHttpServer } from '../lib/http-server';
import { closeServer, dialHost, listen } from '../lib/listen';
import type { Logger } from '../lib/logger';
import { createGateway } from './app';
import type { Gateway, GatewayOptions } from './app';

export interface RunningGateway {
  url: string;
  port: number;
  gateway: Gateway;
  server: http.Server;
  /** Base URL of the separate /metrics server (`telemetry.metricsPort`), when there is one. */
  metricsUrl?: string;
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

/** How often a draining replica looks at what it still holds, and how often it says so in the log. */
const DRAIN_POLL_MS = 200;
const DRAIN_LOG_MS = 30_000;

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

/** Starts the gateway's HTTP server: routes plus WebSocket upgrades for the results sockets. */
export interface ServerOptions extends Omit<GatewayOptions, 'upstreamUrl'> {
  /** How the shutdown waits out `shutdownDelayMs` (tests resolve it themselves). */
  delay?: (ms: number) => Promise<unknown>;
}

export async function startGateway(cfg: Config, logger: Logger, upstreamUrl: string, opts: ServerOptions = {}): Promise<RunningGateway> {
  const { delay = (ms: number) => sleep(ms), ...gatewayOpts } = opts;
  const gateway = createGateway(cfg, logger, { ...gatewayOpts, upstreamUrl });
  // In a fleet: listening only once this replica heartbeats and hears its control channel.
  try {
    await gateway.joined;
  } catch (err) {
    await gateway.close();
    throw err;
  }
  const server = createHttpServer(gateway.handler, cfg.server);
  // Upgraded sockets leave the server's own bookkeeping: track them so shutdown can cut them.
  const upgraded = new Set<Duplex>();
  server.on('upgrade', (req, socket, head) => {
    // An upgrade error has no `res`: without this handler it would crash the process.
    socket.on('error', (err) => logger.debug({ err }, 'upgrade socket error'));
    if (!gateway.lifecycle.acceptsUpgrades) {
      socket.end('HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n');
      return;
    }
    upgraded.add(socket);
    socket.once('close', () => upgraded.delete(socket));
    if (!gateway.handleUpgrade(req, socket, head)) {
      socket.end('HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n');
    }
  });
  let port: number;
  try {
    port = await listen(server, cfg.port, cfg.host, { server: 'gateway', setting: settingOf('port') });
  } catch (err) {
    await gateway.close();
    throw err;
  }
  const url = `http://${dialHost(cfg.host)}:${port}`;
  const metricsServer = gateway.metricsApp && createHttpServer(gateway.metricsApp, cfg.server);
  let metricsUrl: string | undefined;
  const metricsOwner = { server: 'metrics', setting: settingOf('telemetry.metricsPort') };
  if (metricsServer) {
    try {
      metricsUrl = `http://${dialHost(cfg.host)}:${await listen(metricsServer, cfg.telemetry.metricsPort ?? 0, cfg.host, metricsOwner)}`;
    } catch (err) {
      await closeServer(server);
      await gateway.close();
      throw err;
    }
  }
  let closing: Promise<void> | undefined;
  let draining: Promise<void> | undefined;
  const hurry = new AbortController();
  const hurried = new Promise<void>((resolve) => hurry.signal.addEventListener('abort', () => resolve(), { once: true }));

  /**
   * Load balancers notice /readyz 503 only at their next probe: keep serving until they have (or a
   * second signal). `next`: the step that follows, as the log names it.
   */
  const serveUnready = async (delayMs: number, log: Logger, next: 'the drain' | 'the hand-over'): Promise<void> => {
    if (delayMs <= 0) return;
    log.info({ delayMs }, `not ready: serving ${delayMs} ms more before ${next}`);
    await Promise.race([delay(delayMs), hurried]);
  };

  /**
   * The drain (the replica `holding`): returns once nothing is held, at the deadline, or when
   * hurried, with the words the close logs for each stream still here (undefined: nothing was held).
   */
  const drain = async (drainMs: number): Promise<string | undefined> => {
    const log = logger.child({ component: 'drain' });
    const deadline = Date.now() + drainMs;
    gateway.markUnready();
    await serveUnready(Math.min(cfg.shutdownDelayMs, drainMs / 2), log, 'the drain');
    if (!(await gateway.holdConnections()))
      return void log.info('no other replica alive to take the streams: ending them as at any shutdown');
    let nextLogAt = 0;
    for (;;) {
      server.closeIdleConnections();
      const { sockets, relays } = gateway.held();
      const now = Date.now();
      const secondsLeft = Math.max(0, Math.ceil((deadline - now) / 1000));
      gateway.metrics.drainState({ draining: true, sockets, relays, secondsLeft });
      const state = { sockets, relays, streams: gateway.sessions.activeCount, inFlight: gateway.inFlight, secondsLeft };
      if (sockets + relays + gateway.inFlight === 0) {
        log.info(state, 'drain over: no client connection left');
        return 'drain over';
      }
      if (hurry.signal.aborted) {
        log.warn(state, 'drain ended by a second signal: handing over or ending what is left');
        return 'drain ended early';
      }
      if (now >= deadline) {
        log.warn(state, 'drain deadline reached: handing over or ending what is left');
        return 'drain deadline';
      }
      if (now >= nextLogAt) {
        log.info(state, `draining: holding ${sockets} results sockets and ${relays} media relays, ${secondsLeft} s left`);
        nextLogAt = now + DRAIN_LOG_MS;
      }
      await Promise.race([sleep(DRAIN_POLL_MS), hurried]);
    }
  };

  /** The final close; `afterDrain`: a drain already waited out `shutdownDelayMs` (and why it ended). */
  const close = (graceMs: number = cfg.shutdownGraceMs, afterDrain?: { why?: string }): Promise<void> => {
    closing ??= shutdown(graceMs, afterDrain);
    return closing;
  };

  const shutdown = async (graceMs: number, afterDrain: { why?: string } | undefined): Promise<void> => {
    const started = Date.now();
    const deadline = started + graceMs;
    const log = logger.child({ component: 'shutdown' });
    if (!afterDrain) {
      gateway.markUnready();
      await serveUnready(Math.min(cfg.shutdownDelayMs, graceMs / 2), log, 'the hand-over');
    }
    // Leave a slice of the grace period for the final close after waiting on requests in flight.
    const waitUntil = deadline - Math.min(1000, (deadline - Date.now()) / 4);
    const serverClosed = new Promise<void>((resolve) => server.close(() => resolve()));
    server.closeIdleConnections();
    log.info(
      { graceMs, legacyStreams: gateway.sessions.activeCount, inFlight: gateway.inFlight },
      `hand-over: ${gateway.sessions.activeCount} legacy streams to hand over (fleet) or end`,
    );
    if (!(await within(gateway.handOverOrEnd(afterDrain?.why), waitUntil - Date.now(), log)))
      log.warn('legacy streams did not all end in time');
    let reported = -1;
    while (gateway.inFlight > 0 && Date.now() < waitUntil) {
      if (gateway.inFlight !== reported) {
        reported = gateway.inFlight;
        log.info({ inFlight: reported, leftMs: waitUntil - Date.now() }, `waiting for ${reported} requests in flight`);
      }
      server.closeIdleConnections();
      await sleep(25);
    }
    if (gateway.inFlight > 0) log.warn({ inFlight: gateway.inFlight }, 'grace period over: cutting requests still in flight');
    server.closeAllConnections();
    if (!(await within(gateway.close(), deadline - Date.now(), log))) log.warn('gateway resources did not close in time');
    for (const s of upgraded) s.destroy();
    server.closeAllConnections();
    await within(serverClosed, deadline - Date.now(), log);
    if (metricsServer) await within(closeServer(metricsServer), deadline - Date.now(), log);
    log.info({ ms: Date.now() - started }, `gateway closed in ${Date.now() - started} ms`);
  };

  return {
    url,
    port,
    gateway,
    server,
    metricsUrl,
    close,
    drainAndClose(drainMs = cfg.server.drainTimeoutMs, graceMs = cfg.shutdownGraceMs) {
      if (gateway.fleet.solo) return close(graceMs);
      draining ??= drain(drainMs).then((why) => close(graceMs, { why }));
      return draining;
    },
    hurry() {
      hurry.abort();
    },
  };
}

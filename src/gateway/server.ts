import type http from 'node:http';
import type { Duplex } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
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
   * (at most half the grace period) of normal service with /readyz 503, then stop accepting
   * connections, end legacy streams (results sockets close with 1001), let requests in flight
   * finish, flush telemetry, then cut whatever is left.
   */
  close(graceMs?: number): Promise<void>;
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
    if (gateway.draining) {
      socket.end('HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n');
      return;
    }
    upgraded.add(socket);
    socket.once('close', () => upgraded.delete(socket));
    if (!gateway.handleUpgrade(req, socket, head)) {
      socket.end('HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n');
    }
  });
  const port = await listen(server, cfg.port, cfg.host);
  const url = `http://${dialHost(cfg.host)}:${port}`;
  const metricsServer = gateway.metricsApp && createHttpServer(gateway.metricsApp, cfg.server);
  let metricsUrl: string | undefined;
  if (metricsServer) {
    try {
      metricsUrl = `http://${dialHost(cfg.host)}:${await listen(metricsServer, cfg.telemetry.metricsPort ?? 0, cfg.host)}`;
    } catch (err) {
      await closeServer(server);
      await gateway.close();
      throw err;
    }
  }
  let closing: Promise<void> | undefined;

  const shutdown = async (graceMs: number): Promise<void> => {
    const started = Date.now();
    const deadline = started + graceMs;
    const log = logger.child({ component: 'shutdown' });
    // Load balancers notice /readyz 503 only at their next probe: keep serving until they have.
    const delayMs = Math.min(cfg.shutdownDelayMs, graceMs / 2);
    if (delayMs > 0) {
      gateway.markUnready();
      log.info({ delayMs }, `not ready: serving ${delayMs} ms more before draining`);
      await delay(delayMs);
    }
    // Leave a slice of the grace period for the final close after waiting on requests in flight.
    const waitUntil = deadline - Math.min(1000, (deadline - Date.now()) / 4);
    const serverClosed = new Promise<void>((resolve) => server.close(() => resolve()));
    server.closeIdleConnections();
    log.info({ graceMs, legacyStreams: gateway.sessions.activeCount, inFlight: gateway.inFlight }, `draining: ${gateway.sessions.activeCount} legacy streams to hand over (fleet) or end`);
    if (!(await within(gateway.drain(), waitUntil - Date.now(), log))) log.warn('legacy streams did not all end in time');
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
    close(graceMs = cfg.shutdownGraceMs) {
      closing ??= shutdown(graceMs);
      return closing;
    },
  };
}

import http from 'node:http';
import type { Duplex } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Config } from '../config';
import { dialHost, listen } from '../lib/listen';
import type { Logger } from '../lib/logger';
import { createGateway } from './app';
import type { Gateway, GatewayOptions } from './app';

export interface RunningGateway {
  url: string;
  port: number;
  gateway: Gateway;
  server: http.Server;
  /**
   * Graceful shutdown, finished within `graceMs` (default `shutdownGraceMs`): stop accepting
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
export async function startGateway(
  cfg: Config,
  logger: Logger,
  upstreamUrl: string,
  opts: Omit<GatewayOptions, 'upstreamUrl'> = {},
): Promise<RunningGateway> {
  const gateway = createGateway(cfg, logger, { ...opts, upstreamUrl });
  const server = http.createServer(gateway.handler);
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
  let closing: Promise<void> | undefined;

  const shutdown = async (graceMs: number): Promise<void> => {
    const started = Date.now();
    const deadline = started + graceMs;
    // Leave a slice of the grace period for the final close after waiting on requests in flight.
    const waitUntil = deadline - Math.min(1000, graceMs / 4);
    const log = logger.child({ component: 'shutdown' });
    const serverClosed = new Promise<void>((resolve) => server.close(() => resolve()));
    server.closeIdleConnections();
    log.info({ graceMs, legacyStreams: gateway.sessions.activeCount, inFlight: gateway.inFlight }, `draining: ${gateway.sessions.activeCount} legacy streams to end`);
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
    log.info({ ms: Date.now() - started }, `gateway closed in ${Date.now() - started} ms`);
  };

  return {
    url,
    port,
    gateway,
    server,
    close(graceMs = cfg.shutdownGraceMs) {
      closing ??= shutdown(graceMs);
      return closing;
    },
  };
}

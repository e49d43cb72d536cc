/**
 * The gateway's HTTP listeners: its server (timeouts from `server.*`; results-socket upgrades,
 * refused once the lifecycle takes none and tracked, since upgraded sockets leave the server's own
 * bookkeeping) and the separate `/metrics` server (`telemetry.metricsPort`).
 */
import type http from 'node:http';
import type { Duplex } from 'node:stream';
import { settingOf } from '../config';
import type { Config } from '../config';
import { createHttpServer } from '../lib/http-server';
import { closeServer, dialHost, listen } from '../lib/listen';
import type { Logger } from '../lib/logger';
import type { Gateway } from './app';

export interface GatewayListeners {
  server: http.Server;
  port: number;
  url: string;
  /** Base URL of the separate /metrics server, when there is one. */
  metricsUrl?: string;
  /** Closes the connections idle between requests. */
  closeIdle(): void;
  /** Stops accepting connections; settles once the gateway's server has closed. */
  stopAccepting(): Promise<void>;
  /** Cuts every HTTP connection (upgraded sockets are not the server's). */
  cutRequests(): void;
  /** Cuts the upgraded sockets, then every HTTP connection. */
  cutAll(): void;
  /** Closes the /metrics server, if any. */
  closeMetrics(): Promise<void>;
}

/**
 * Listens on `port` (and `telemetry.metricsPort` when set). A listen that fails closes what this
 * opened and rejects; the gateway is the caller's to close.
 */
export async function listenGateway(
  gateway: Pick<Gateway, 'handler' | 'metricsApp' | 'lifecycle' | 'handleUpgrade'>,
  cfg: Config,
  logger: Logger,
): Promise<GatewayListeners> {
  const server = createHttpServer(gateway.handler, cfg.server);
  const upgraded = trackUpgrades(server, gateway, logger);
  const port = await listen(server, cfg.port, cfg.host, { server: 'gateway', setting: settingOf('port') });
  const metricsServer = gateway.metricsApp && createHttpServer(gateway.metricsApp, cfg.server);
  let metricsUrl: string | undefined;
  if (metricsServer) {
    const owner = { server: 'metrics', setting: settingOf('telemetry.metricsPort') };
    try {
      metricsUrl = `http://${dialHost(cfg.host)}:${await listen(metricsServer, cfg.telemetry.metricsPort ?? 0, cfg.host, owner)}`;
    } catch (err) {
      await closeServer(server);
      throw err;
    }
  }
  return {
    server,
    port,
    url: `http://${dialHost(cfg.host)}:${port}`,
    metricsUrl,
    closeIdle: () => server.closeIdleConnections(),
    stopAccepting: () => new Promise<void>((resolve) => server.close(() => resolve())),
    cutRequests: () => server.closeAllConnections(),
    cutAll() {
      for (const s of upgraded) s.destroy();
      server.closeAllConnections();
    },
    closeMetrics: () => (metricsServer ? closeServer(metricsServer) : Promise.resolve()),
  };
}

/** Results-socket upgrades: 503 once the lifecycle refuses them, 404 for any other path. Returns the open ones. */
function trackUpgrades(server: http.Server, gateway: Pick<Gateway, 'lifecycle' | 'handleUpgrade'>, logger: Logger): ReadonlySet<Duplex> {
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
  return upgraded;
}

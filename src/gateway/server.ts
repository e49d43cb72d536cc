import type http from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Config } from '../config';
import type { Logger } from '../lib/logger';
import { createGateway } from './app';
import type { Gateway, GatewayOptions } from './app';
import { listenGateway } from './listeners';
import type { GatewayListeners } from './listeners';
import { shutdownControl } from './shutdown';
import type { ShutdownControl } from './shutdown';

export interface RunningGateway extends ShutdownControl {
  url: string;
  port: number;
  gateway: Gateway;
  server: http.Server;
  /** Base URL of the separate /metrics server (`telemetry.metricsPort`), when there is one. */
  metricsUrl?: string;
}

/** `startGateway`'s options: the gateway's own, and how its shutdown waits. */
export interface ServerOptions extends Omit<GatewayOptions, 'upstreamUrl'> {
  /** How the shutdown waits out `shutdownDelayMs` (tests resolve it themselves). */
  delay?: (ms: number) => Promise<unknown>;
}

/**
 * Starts the gateway: builds it, joins its fleet, listens (routes plus WebSocket upgrades for the
 * results sockets: ./listeners.ts), and hands back its shutdown (./shutdown.ts).
 */
export async function startGateway(cfg: Config, logger: Logger, upstreamUrl: string, opts: ServerOptions = {}): Promise<RunningGateway> {
  const { delay = (ms: number) => sleep(ms), ...gatewayOpts } = opts;
  const gateway = createGateway(cfg, logger, { ...gatewayOpts, upstreamUrl });
  let listeners: GatewayListeners;
  try {
    // In a fleet: listening only once this replica heartbeats and hears its control channel.
    await gateway.joined;
    listeners = await listenGateway(gateway, cfg, logger);
  } catch (err) {
    await gateway.close();
    throw err;
  }
  const { url, port, server, metricsUrl } = listeners;
  return { url, port, gateway, server, metricsUrl, ...shutdownControl(gateway, listeners, { cfg, logger, delay }) };
}

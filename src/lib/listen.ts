import type http from 'node:http';
import type { AddressInfo } from 'node:net';

/** Which server wants a port, and the setting that moves it, for the error when it cannot have it. */
export interface PortOwner {
  /** `gateway`, `emulator`, `metrics`. */
  server: string;
  /** `PORT (or "port" in the config file)`. */
  setting: string;
}

function unavailableMessage(port: number, code: 'EADDRINUSE' | 'EACCES', owner: PortOwner | undefined): string {
  const who = owner ? ` (${owner.server})` : '';
  if (code === 'EADDRINUSE') return `port ${port} is in use${who}${owner ? `: set ${owner.setting} to a free port` : ''}`;
  const privileged = port < 1024;
  const fix = owner ? `; set ${owner.setting} to ${privileged ? 'a port above 1023' : 'another port'}` : '';
  return `no permission to listen on port ${port}${who}${privileged ? ': a port below 1024 needs privileges' : ''}${fix}`;
}

/**
 * A port a server cannot listen on: taken by another process (EADDRINUSE), or not permitted
 * (EACCES: below 1024 without the privilege). Its message is one line for a person.
 */
export class PortUnavailableError extends Error {
  override name = 'PortUnavailableError';
  constructor(
    readonly port: number,
    readonly code: 'EADDRINUSE' | 'EACCES',
    owner?: PortOwner,
    options?: ErrorOptions,
  ) {
    super(unavailableMessage(port, code, owner), options);
  }
}

/**
 * Listens and resolves with the bound port (port 0 picks a free one). A port in use or not
 * permitted rejects with `PortUnavailableError` (naming `owner`'s setting when given).
 */
export function listen(server: http.Server, port: number, host: string, owner?: PortOwner): Promise<number> {
  return new Promise((resolve, reject) => {
    const onError = (err: NodeJS.ErrnoException) =>
      reject(err.code === 'EADDRINUSE' || err.code === 'EACCES' ? new PortUnavailableError(port, err.code, owner, { cause: err }) : err);
    server.once('error', onError);
    server.listen(port, host, () => {
      server.off('error', onError);
      resolve((server.address() as AddressInfo).port);
    });
  });
}

/** Closes a server, ending idle keep-alive connections so the promise settles promptly. */
export function closeServer(server: http.Server): Promise<void> {
  return new Promise((resolve) => {
    if (!server.listening) return resolve();
    server.close(() => resolve());
    server.closeIdleConnections?.();
    // Connections still busy after a moment are cut: close() would otherwise wait forever.
    const t = setTimeout(() => server.closeAllConnections?.(), 1000);
    t.unref();
  });
}

/** URL host for a bind address (0.0.0.0 and :: are not dialable). */
export function dialHost(host: string): string {
  if (host === '0.0.0.0' || host === '::' || host === '') return '127.0.0.1';
  return host.includes(':') ? `[${host}]` : host;
}

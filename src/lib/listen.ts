import type http from 'node:http';
import type { AddressInfo } from 'node:net';

/** Listens and resolves with the bound port (port 0 picks a free one). */
export function listen(server: http.Server, port: number, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const onError = (err: Error) => reject(err);
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

import http from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';

/** The server timeouts (config `server.*`). */
export interface ServerTimeouts {
  headersTimeoutMs: number;
  requestTimeoutMs: number;
  keepAliveTimeoutMs: number;
  idleTimeoutMs: number;
}

/**
 * An HTTP server with deliberate timeouts:
 * - headers must arrive within `headersTimeoutMs` and the whole request within `requestTimeoutMs`
 *   (Node answers 408 and closes);
 * - an idle keep-alive connection is kept `keepAliveTimeoutMs`;
 * - a connection without traffic for `idleTimeoutMs` is closed, unless a response is still in
 *   progress on it (an SSE stream or a long poll is governed by its own limits, not this one).
 * Upgraded sockets (WebSocket) leave the server's timeouts: the caller's upgrade handler owns them.
 */
const LATEST = Symbol('latest response');
type Tracked = Socket & { [LATEST]?: http.ServerResponse };

export function createHttpServer(listener: http.RequestListener, t: ServerTimeouts): http.Server {
  const server = http.createServer({
    headersTimeout: t.headersTimeoutMs,
    requestTimeout: t.requestTimeoutMs,
    keepAliveTimeout: t.keepAliveTimeoutMs,
    // How often Node checks the headers/request deadlines (default 30 s would let them run over).
    connectionsCheckingInterval: Math.max(50, Math.min(30_000, Math.floor(t.headersTimeoutMs / 4))),
  });
  server.timeout = t.idleTimeoutMs;
  // The connection's latest response is kept on the socket, for the idle-timeout guard below.
  server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
    (req.socket as Tracked)[LATEST] = res;
    listener(req, res);
  });
  // A listener here replaces Node's default (destroy on timeout), so a busy response survives.
  // Responses on one connection finish in order: while the latest is unfinished, one is in progress.
  server.on('timeout', (socket: Tracked) => {
    const res = socket[LATEST];
    if (!res || res.writableFinished) socket.destroy();
  });
  server.on('upgrade', (_req: http.IncomingMessage, socket: Duplex) => (socket as Socket).setTimeout?.(0));
  return server;
}

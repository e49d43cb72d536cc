/**
 * `/v1beta/*` and `/billing/*` to the upstream, unchanged (http-proxy-middleware): method, path
 * (slashes inside `/billing/pricing/{model}` included), query, end-to-end headers, status and body
 * all stream through. Runs before any body parser. The gateway adds only `x-request-id`.
 *
 * What plain http-proxy does not do, and this module adds:
 * - keep-alive to the upstream (without an agent http-proxy sends `connection: close` every time);
 * - hop-by-hop headers stripped both ways (RFC 9110 §7.6.1);
 * - a client that goes away aborts the upstream request, before or during the response (SSE);
 * - an upstream that fails mid-response ends the client's response instead of leaving it hanging;
 * - unreachable → 502, silent for `timeoutMs` → 504, both with a `{detail}` body; never a hang.
 */
import http from 'node:http';
import https from 'node:https';
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { createProxyMiddleware } from 'http-proxy-middleware';
import type { Plugin } from 'http-proxy-middleware';
import type { Logger } from '../lib/logger';

export type PassthroughPrefix = 'v1beta' | 'billing';
export type PassthroughOutcome = 'ok' | 'client_abort' | 'upstream_unreachable' | 'upstream_timeout' | 'upstream_reset';

export interface PassthroughEvent {
  prefix: PassthroughPrefix;
  outcome: PassthroughOutcome;
  /** Status sent to the client (0 when none was). */
  status: number;
  /** Time until the upstream's response headers, when they came. */
  upstreamHeadersMs?: number;
  /** The client's request headers (migration telemetry reads the key and User-Agent; never log them). */
  headers: IncomingHttpHeaders;
}

export interface PassthroughOptions {
  upstreamUrl: string;
  logger: Logger;
  /** Longest upstream silence (connect, headers, or between body chunks) before 504 / cut. */
  timeoutMs: number;
  onSettled?(e: PassthroughEvent): void;
}

export interface Passthrough {
  /** Proxies /v1beta and /billing requests; calls `next()` for every other path. */
  handle(req: IncomingMessage, res: ServerResponse, next: (err?: unknown) => void): void;
  /** Destroys the upstream connection pool. */
  close(): void;
}

const PREFIX = /^\/+(v1beta|billing)(?:[/?#]|$)/;

/** The passthrough prefix of a raw request URL, if it has one (double slashes tolerated). */
export function passthroughPrefix(url: string): PassthroughPrefix | undefined {
  return PREFIX.exec(url)?.[1] as PassthroughPrefix | undefined;
}

const HOP_BY_HOP = ['connection', 'keep-alive', 'proxy-connection', 'proxy-authenticate', 'proxy-authorization', 'te', 'trailer', 'upgrade'];

/** Removes hop-by-hop headers, including those the Connection header names. */
export function stripHopByHop(headers: IncomingHttpHeaders, alsoFraming = false): void {
  const conn = headers.connection;
  // The common values name no other header: skip the split.
  if (typeof conn === 'string' && !/^\s*(keep-alive|close)\s*$/i.test(conn)) {
    for (const name of conn.split(',')) {
      const n = name.trim().toLowerCase();
      // Never let a client strip end-to-end headers the upstream needs by naming them.
      if (n && n !== 'authorization' && n !== 'content-length' && n !== 'content-type') delete headers[n];
    }
  }
  // Checked first: deleting an absent key still costs the object its fast shape.
  for (const h of HOP_BY_HOP) if (headers[h] !== undefined) delete headers[h];
  // The response framing is re-chosen by Node for the client connection.
  if (alsoFraming && headers['transfer-encoding'] !== undefined) delete headers['transfer-encoding'];
}

interface Flight {
  prefix: PassthroughPrefix;
  startedAt: number;
  proxyReq?: http.ClientRequest;
  headersAt?: number;
  clientGone: boolean;
  timedOut: boolean;
  unreachable: boolean;
  broken: boolean;
}

export function createPassthrough(opts: PassthroughOptions): Passthrough {
  const target = new URL(opts.upstreamUrl);
  // Idle pooled sockets are closed before a typical upstream's keep-alive timeout (5 s in Node),
  // so a request never lands on a socket the upstream is closing.
  const agentOpts = { keepAlive: true, timeout: 4000, scheduling: 'lifo' as const, noDelay: true };
  const agent = target.protocol === 'https:' ? new https.Agent(agentOpts) : new http.Agent(agentOpts);
  const flights = new WeakMap<IncomingMessage, Flight>();
  const log = opts.logger.child({ component: 'passthrough' });

  const plugin: Plugin = (proxy) => {
    proxy.on('proxyReq', (proxyReq, req) => {
      const f = flights.get(req);
      if (!f) return;
      f.proxyReq = proxyReq;
      if (f.clientGone) {
        proxyReq.destroy();
        return;
      }
      proxyReq.setTimeout(opts.timeoutMs, () => {
        f.timedOut = true;
        proxyReq.destroy();
      });
    });

    proxy.on('proxyRes', (proxyRes, req, res) => {
      const f = flights.get(req);
      stripHopByHop(proxyRes.headers, true);
      if (f) f.headersAt = Date.now();
      // An IncomingMessage only emits 'error' when someone listens; the close below handles it.
      proxyRes.on('error', () => undefined);
      proxyRes.once('close', () => {
        if (proxyRes.complete || res.writableEnded) return;
        // The upstream went away (or timed out) mid-response: end the client's response too.
        if (f && !f.clientGone) {
          f.broken = true;
          log.warn({ reqId: res.getHeader('x-request-id'), url: req.url, timedOut: f.timedOut }, 'upstream response cut mid-stream');
        }
        res.destroy();
      });
    });

    proxy.on('error', (err, req, res) => {
      const f = flights.get(req as IncomingMessage);
      if (!f || f.clientGone) return;
      const out = res as ServerResponse;
      if (!f.timedOut) f.unreachable = true;
      log.warn(
        { reqId: out.getHeader?.('x-request-id'), url: req.url, code: (err as NodeJS.ErrnoException).code, err: err.message, timedOut: f.timedOut },
        f.timedOut ? 'upstream timed out' : 'upstream unreachable',
      );
      if (typeof out.writeHead !== 'function') return;
      if (out.headersSent) {
        f.broken = true;
        out.destroy();
        return;
      }
      const body = JSON.stringify({ detail: f.timedOut ? 'Upstream timed out' : 'Upstream unreachable' });
      out.writeHead(f.timedOut ? 504 : 502, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
      out.end(body);
    });

    // The client's socket was gone when the upstream reset: nothing to answer.
    proxy.on('econnreset', () => undefined);
  };

  const proxy = createProxyMiddleware<IncomingMessage, ServerResponse>({
    target: opts.upstreamUrl,
    changeOrigin: true,
    xfwd: true,
    agent,
    // No default plugins: their error page, console logger and SSE handling are replaced above.
    ejectPlugins: true,
    plugins: [plugin],
  });

  return {
    handle(req, res, next) {
      const prefix = passthroughPrefix(req.url ?? '/');
      if (!prefix) return next();
      const f: Flight = { prefix, startedAt: Date.now(), clientGone: false, timedOut: false, unreachable: false, broken: false };
      flights.set(req, f);
      stripHopByHop(req.headers);
      res.once('close', () => {
        if (!res.writableFinished) {
          // Before or during the response: the upstream must stop working for nobody.
          f.clientGone = true;
          f.proxyReq?.destroy();
        }
        opts.onSettled?.({
          prefix,
          outcome: f.clientGone && !f.broken ? 'client_abort' : f.timedOut ? 'upstream_timeout' : f.unreachable ? 'upstream_unreachable' : f.broken ? 'upstream_reset' : 'ok',
          status: res.headersSent ? res.statusCode : 0,
          upstreamHeadersMs: f.headersAt === undefined ? undefined : f.headersAt - f.startedAt,
          headers: req.headers,
        });
      });
      void proxy(req, res, next);
    },
    close() {
      agent.destroy();
    },
  };
}

/**
 * `/v1beta/*` and `/billing/*` to the upstream, unchanged: method, path (slashes inside
 * `/billing/pricing/{model}` included), query, end-to-end headers, status and body all stream
 * through a direct `node:http` pipe. Runs before any body parser and before Express. The gateway
 * adds `x-request-id` (the client's own when well-formed, else generated) on both legs and
 * `x-forwarded-for/-proto/-host` upstream; `traceparent` and every other end-to-end header pass
 * through as sent, except with tracing on: then the request is the instrumentation's server span
 * and the upstream leg its child `passthrough.upstream`, whose own `traceparent` (and the caller's
 * `tracestate` and `baggage`, through the propagator) replace the caller's.
 *
 * What the pipe does besides copying bytes:
 * - keep-alive to the upstream (one agent, LIFO, idle sockets closed before the upstream would);
 * - hop-by-hop headers stripped both ways while copying (RFC 9110 §7.6.1);
 * - `.`/`..` path segments (also percent-encoded) refused with 400 before anything is forwarded;
 * - a client that goes away aborts the upstream request, before or during the response (SSE);
 * - an upstream that fails mid-response ends the client's response instead of leaving it hanging;
 * - unreachable → 502, silent for `timeoutMs` → 504, both with a `{detail}` body; never a hang;
 * - no buffering: each upstream chunk is written to the client as it comes (SSE).
 *
 * A request is one record (`Flight`, also the settled event) with one close listener on the client
 * response; upstream silence is found by one sweep per gateway (`SilenceWatch`).
 */
import http from 'node:http';
import https from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import type { Readable, Writable } from 'node:stream';
import { parseBearer } from '../lib/bearer';
import { memoKeyHash } from '../lib/keys';
import type { Logger } from '../lib/logger';
import { ATTR, activeSpan, activeSpanContext, failSpan, setServerRoute, startClientSpan, traceIdOf, tracingOn } from '../lib/spans';
import type { Span } from '../lib/spans';
import { requestIdOf } from './http';
import { redactQuery, routeLabel } from './telemetry/http';

export type PassthroughPrefix = 'v1beta' | 'billing';
export type PassthroughOutcome = 'ok' | 'client_abort' | 'upstream_unreachable' | 'upstream_timeout' | 'upstream_reset' | 'bad_path';

/** What the settled hook sees of one proxied request (the per-request record itself: kept no longer than its telemetry batch). */
export interface PassthroughEvent {
  readonly prefix: PassthroughPrefix;
  readonly outcome: PassthroughOutcome;
  /** Status sent to the client (0 when none was). */
  readonly status: number;
  /** Time until the upstream's response headers, when they came. */
  readonly upstreamHeadersMs?: number;
  /** From arrival to the client response's close. */
  readonly durationMs: number;
  /** Wall-clock ms of the client response's close: the access line's time, however late it is written. */
  readonly settledAtMs: number;
  /** The id sent upstream and to the client (the upstream's own when it answered with one). */
  readonly requestId: string;
  /** The client's `Authorization` and `User-Agent`, picked up while its headers were copied (per-caller telemetry without building `req.headers`). */
  readonly authorization?: string;
  readonly userAgent?: string;
  /** The trace of the request, for its access line: its span's (tracing on), else the caller's `traceparent`'s. */
  readonly traceId?: string;
  /** The request's server span (tracing on), for its access line: written later, outside that span. */
  readonly spanId?: string;
  /** The client's request: method, URL and headers stay readable at settle time. */
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
}

export interface PassthroughOptions {
  upstreamUrl: string;
  logger: Logger;
  /** Longest upstream silence (connect, headers, or between body chunks either way) before 504 / cut; 0: none. */
  timeoutMs: number;
  /** Called once per proxied request, when the client response closes. */
  onSettled?(e: PassthroughEvent): void;
}

export interface Passthrough {
  /** Proxies /v1beta and /billing requests; calls `next()` for every other path. */
  handle(req: IncomingMessage, res: ServerResponse, next: () => void): void;
  /** Proxies /v1beta and /billing requests and answers true; false for every other path. */
  proxy(req: IncomingMessage, res: ServerResponse): boolean;
  /** Proxied requests whose client response has not closed yet. */
  readonly inFlight: number;
  /** Destroys the upstream connection pool. */
  close(): void;
}

const PREFIX = /^\/+(v1beta|billing)(?:[/?#]|$)/;

/** The passthrough prefix of a raw request URL, if it has one (double slashes tolerated). */
export function passthroughPrefix(url: string): PassthroughPrefix | undefined {
  return PREFIX.exec(url)?.[1] as PassthroughPrefix | undefined;
}

/**
 * A `.` or `..` segment, literal or percent-encoded, between any separators an upstream might
 * decode (`/`, `\`, `%2f`, `%5c`): the upstream would resolve it to a path the gateway never routed.
 */
const DOT_SEGMENT = /(?:^|\/|\\|%2f|%5c)(?:\.|%2e){1,2}(?=$|\/|\\|%2f|%5c)/i;

export function hasDotSegment(path: string): boolean {
  // Most paths hold neither a dot nor an escape: no regex scan for them.
  return (path.includes('.') || path.includes('%')) && DOT_SEGMENT.test(path);
}

/** Hop-by-hop (RFC 9110 §7.6.1), plus what the pipe sets itself on the upstream leg. */
const DROP_UPSTREAM = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'upgrade',
  'host',
  'x-request-id',
  'x-forwarded-for',
  'x-forwarded-proto',
  'x-forwarded-host',
]);
/** With tracing on the propagator writes the trace context of the upstream leg's own span: the caller's is not copied. */
const DROP_UPSTREAM_TRACED = new Set([...DROP_UPSTREAM, 'traceparent', 'tracestate', 'baggage']);
/** Hop-by-hop, plus the framing Node re-chooses for the client connection. */
const DROP_DOWNSTREAM = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'upgrade',
  'transfer-encoding',
]);
/** Connection values that name no other header (the common case: no second pass). */
const PLAIN_CONNECTION = /^\s*(keep-alive|close)\s*$/i;
/** End-to-end headers a client may not strip by naming them in Connection. */
const NEVER_NAMED = new Set(['authorization', 'content-length', 'content-type']);

/** Drops from a raw header list the headers a Connection value names (rare: only when it names any). */
function dropNamed(raw: string[], connection: string): string[] {
  const named = new Set(
    connection
      .split(',')
      .map((n) => n.trim().toLowerCase())
      .filter((n) => n && !NEVER_NAMED.has(n)),
  );
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) if (!named.has(raw[i]!.toLowerCase())) out.push(raw[i]!, raw[i + 1]!);
  return out;
}

class Flight implements PassthroughEvent {
  outcome: PassthroughOutcome = 'ok';
  status = 0;
  upstreamHeadersMs?: number;
  durationMs = 0;
  settledAtMs = 0;
  authorization?: string;
  userAgent?: string;
  /** The caller's `traceparent` (tracing off: parsed for the access line only when it is written). */
  traceparent?: string;
  /** The server span's trace and id (tracing on). */
  tracedId?: string;
  spanId?: string;
  /** The upstream leg's client span (tracing on). */
  span?: Span;
  upstream?: http.ClientRequest;
  readonly startedAt = performance.now();
  /** Last time bytes moved to or from the upstream (`SilenceWatch`). */
  lastActivity = this.startedAt;
  constructor(
    readonly prefix: PassthroughPrefix,
    readonly req: IncomingMessage,
    readonly res: ServerResponse,
    public requestId: string,
  ) {}

  get traceId(): string | undefined {
    return this.tracedId ?? traceIdOf(this.traceparent);
  }
}

/**
 * Every chunk written as it comes (no buffering: SSE), paused while the other side drains, ended
 * with the source; failures are the close handlers' (above). Each chunk counts as upstream
 * activity for `f`.
 */
function pump(f: Flight, from: Readable, to: Writable): void {
  const resume = () => from.resume();
  from.on('data', (chunk: Buffer) => {
    f.lastActivity = performance.now();
    if (!to.write(chunk)) {
      from.pause();
      to.once('drain', resume);
    }
  });
  from.on('end', () => to.end());
}

/**
 * The upstream silence timeout for every request in flight, from one timer: every `timeoutMs / 4`
 * (at most 1 s) it destroys the upstream requests with no bytes either way for `timeoutMs`, so a
 * silent upstream is cut between `timeoutMs` and `timeoutMs` + one period. The timer is unref'd;
 * it stops at the first sweep that finds nothing in flight.
 */
class SilenceWatch {
  private readonly flights = new Set<Flight>();
  private timer: NodeJS.Timeout | undefined;
  private readonly periodMs: number;

  constructor(
    private readonly timeoutMs: number,
    private readonly onSilent: (f: Flight) => void,
  ) {
    this.periodMs = Math.min(1000, Math.max(10, Math.floor(timeoutMs / 4)));
  }

  add(f: Flight): void {
    this.flights.add(f);
    this.timer ??= setInterval(() => this.sweep(), this.periodMs).unref();
  }

  delete(f: Flight): void {
    this.flights.delete(f);
  }

  private sweep(): void {
    if (this.flights.size === 0) {
      clearInterval(this.timer);
      this.timer = undefined;
      return;
    }
    const silentSince = performance.now() - this.timeoutMs;
    for (const f of this.flights) {
      if (f.lastActivity <= silentSince) {
        this.flights.delete(f);
        this.onSilent(f);
      }
    }
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
    this.flights.clear();
  }
}

/** A `{detail}` answer from the gateway itself (the upstream never answered). */
function reply(f: Flight, status: number, detail: string): void {
  const body = JSON.stringify({ detail });
  f.res.writeHead(status, [
    'content-type',
    'application/json',
    'content-length',
    String(Buffer.byteLength(body)),
    'x-request-id',
    f.requestId,
  ]);
  f.res.end(body);
}

export function createPassthrough(opts: PassthroughOptions): Passthrough {
  const target = new URL(opts.upstreamUrl);
  const secure = target.protocol === 'https:';
  const request = secure ? https.request : http.request;
  // Idle pooled sockets are closed before a typical upstream's keep-alive timeout (5 s in Node),
  // so a request never lands on a socket the upstream is closing.
  const agentOpts = { keepAlive: true, timeout: 4000, scheduling: 'lifo' as const, noDelay: true };
  const agent = secure ? new https.Agent(agentOpts) : new http.Agent(agentOpts);
  const hostname = target.hostname.replace(/^\[|\]$/g, '');
  const port = target.port || (secure ? 443 : 80);
  const basePath = target.pathname.replace(/\/+$/, '');
  const log = opts.logger.child({ component: 'passthrough' });
  // Decided once: with tracing off the pipe does exactly what it did without it.
  const traced = tracingOn();
  const dropUpstream = traced ? DROP_UPSTREAM_TRACED : DROP_UPSTREAM;
  let inFlight = 0;
  const watch =
    opts.timeoutMs > 0
      ? new SilenceWatch(opts.timeoutMs, (f) => {
          if (f.outcome === 'ok') f.outcome = 'upstream_timeout';
          f.upstream?.destroy(new Error('upstream silent past the timeout'));
        })
      : undefined;

  const settle = (f: Flight) => {
    inFlight -= 1;
    watch?.delete(f);
    const { res } = f;
    if (!res.writableFinished && f.outcome === 'ok') {
      // Before or during the response: the upstream must stop working for nobody.
      f.outcome = 'client_abort';
      f.upstream?.destroy();
    }
    f.status = res.headersSent ? res.statusCode : 0;
    f.durationMs = performance.now() - f.startedAt;
    f.settledAtMs = Date.now();
    if (f.span) endLeg(f.span, f.outcome, f.status);
    opts.onSettled?.(f);
  };

  const warn = (f: Flight, fields: Record<string, unknown>, msg: string) =>
    log.warn({ reqId: f.requestId, url: redactQuery(f.req.url ?? '/'), ...fields }, msg);

  /** Upstream answered: filter its headers while copying, then every chunk as it comes. */
  const respond = (f: Flight, up: IncomingMessage) => {
    const { res } = f;
    f.lastActivity = performance.now();
    f.upstreamHeadersMs = f.lastActivity - f.startedAt;
    f.span?.setAttribute('http.response.status_code', up.statusCode ?? 0);
    if (f.outcome !== 'ok') {
      up.destroy();
      return;
    }
    const raw = up.rawHeaders;
    let out: string[] = [];
    let connection: string | undefined;
    let upstreamId: string | undefined;
    for (let i = 0; i < raw.length; i += 2) {
      const lower = raw[i]!.toLowerCase();
      if (lower === 'connection') connection = raw[i + 1];
      else if (lower === 'x-request-id') upstreamId ??= raw[i + 1];
      if (!DROP_DOWNSTREAM.has(lower)) out.push(raw[i]!, raw[i + 1]!);
    }
    if (connection && !PLAIN_CONNECTION.test(connection)) out = dropNamed(out, connection);
    // An upstream's own request id is the one the client and the access line get.
    if (upstreamId) f.requestId = upstreamId;
    else out.push('x-request-id', f.requestId);
    res.writeHead(up.statusCode ?? 502, up.statusMessage || undefined, out);
    pump(f, up, res);
    up.on('close', () => {
      // A complete upstream response is no longer the watch's business (the client may still be reading).
      watch?.delete(f);
      if (!up.complete && !res.writableEnded) cut(f, {});
    });
  };

  /** The upstream went away (or went silent) mid-response: end the client's response too, once. */
  const cut = (f: Flight, fields: Record<string, unknown>) => {
    if (f.res.destroyed) return;
    if (f.outcome === 'ok') f.outcome = 'upstream_reset';
    warn(f, { ...fields, timedOut: f.outcome === 'upstream_timeout' }, 'upstream response cut mid-stream');
    f.res.destroy();
  };

  const failed = (f: Flight, err: NodeJS.ErrnoException) => {
    if (f.outcome === 'client_abort') return;
    if (f.res.headersSent) return cut(f, { code: err.code, err: err.message });
    const timedOut = f.outcome === 'upstream_timeout';
    if (!timedOut) f.outcome = 'upstream_unreachable';
    warn(f, { code: err.code, err: err.message, timedOut }, timedOut ? 'upstream timed out' : 'upstream unreachable');
    reply(f, timedOut ? 504 : 502, timedOut ? 'Upstream timed out' : 'Upstream unreachable');
  };

  const proxy = (req: IncomingMessage, res: ServerResponse): boolean => {
    const url = req.url ?? '/';
    const prefix = passthroughPrefix(url);
    if (!prefix) return false;
    // Headers copied in one pass over the raw list: hop-by-hop and what the pipe sets are left out.
    const raw = req.rawHeaders;
    const headers: string[] = [];
    let givenId: string | undefined;
    let connection: string | undefined;
    let xff: string | undefined;
    let proto: string | undefined;
    let host: string | undefined;
    let fwdHost: string | undefined;
    let authorization: string | undefined;
    let userAgent: string | undefined;
    let traceparent: string | undefined;
    let body = false;
    for (let i = 0; i < raw.length; i += 2) {
      const name = raw[i]!;
      const value = raw[i + 1]!;
      const lower = name.toLowerCase();
      if (!dropUpstream.has(lower)) {
        headers.push(name, value);
        if (lower === 'content-length') body = value !== '0';
        else if (lower === 'transfer-encoding') body = true;
        else if (lower === 'authorization') authorization ??= value;
        else if (lower === 'user-agent') userAgent ??= value;
        else if (lower === 'traceparent') traceparent ??= value;
        continue;
      }
      if (lower === 'x-request-id') givenId ??= value;
      else if (lower === 'connection') connection = value;
      else if (lower === 'x-forwarded-for') xff = xff === undefined ? value : `${xff}, ${value}`;
      else if (lower === 'x-forwarded-proto') proto ??= value;
      else if (lower === 'host') host ??= value;
      else if (lower === 'x-forwarded-host') fwdHost ??= value;
    }
    const f = new Flight(prefix, req, res, requestIdOf(givenId));
    f.authorization = authorization;
    f.userAgent = userAgent;
    f.traceparent = traceparent;
    if (traced) {
      const sc = activeSpanContext();
      f.tracedId = sc?.traceId;
      f.spanId = sc?.spanId;
    }
    // Read now, a bad path's too: Node keeps the peer's address once read, and the access line
    // reads it after the response, when the socket may be gone.
    const remote = req.socket.remoteAddress;
    inFlight += 1;
    // 'close' comes once per response: `on` spares the once-wrapper.
    res.on('close', () => settle(f));

    const q = url.indexOf('?');
    let path = q < 0 ? url : url.slice(0, q);
    if (hasDotSegment(path)) {
      f.outcome = 'bad_path';
      reply(f, 400, 'Path segments "." and ".." are not allowed');
      return true;
    }
    // `base + path` clients produce double slashes: fold them in the path, never in the query.
    if (path.includes('//')) path = path.replace(/\/{2,}/g, '/');
    const outHeaders = connection && !PLAIN_CONNECTION.test(connection) ? dropNamed(headers, connection) : headers;
    outHeaders.push('host', target.host, 'x-request-id', f.requestId);
    if (remote) outHeaders.push('x-forwarded-for', xff === undefined ? remote : `${xff}, ${remote}`);
    outHeaders.push('x-forwarded-proto', proto ?? ((req.socket as { encrypted?: boolean }).encrypted ? 'https' : 'http'));
    if (fwdHost ?? host) outHeaders.push('x-forwarded-host', (fwdHost ?? host)!);
    if (traced) traceLeg(f, path, q < 0 ? '' : url.slice(q), outHeaders);

    let up: http.ClientRequest;
    try {
      up = request({
        agent,
        hostname,
        port,
        method: req.method,
        path: basePath + path + (q < 0 ? '' : url.slice(q)),
        // A raw list: Node writes it as given (no per-header setHeader, no Host added).
        headers: outHeaders as unknown as http.OutgoingHttpHeaders,
      });
    } catch (err) {
      f.outcome = 'upstream_unreachable';
      log.error({ err, reqId: f.requestId, url: redactQuery(url) }, 'passthrough failed before proxying');
      reply(f, 502, 'Upstream unreachable');
      return true;
    }
    f.upstream = up;
    up.on('response', (upRes: IncomingMessage) => respond(f, upRes));
    up.on('error', (err: NodeJS.ErrnoException) => failed(f, err));
    // Silence before headers, between body chunks either way: the watch's sweep.
    watch?.add(f);
    if (!body) up.end();
    else pump(f, req, up);
    return true;
  };

  /**
   * Tracing on: the server span (the http instrumentation's) gets the route, the prefix and the
   * caller's key hash; the upstream leg is its child `passthrough.upstream`, whose trace context
   * goes upstream in place of the caller's.
   */
  const traceLeg = (f: Flight, path: string, query: string, outHeaders: string[]) => {
    const server = activeSpan();
    const key = parseBearer(f.authorization);
    server?.setAttributes({ [ATTR.passthroughPrefix]: f.prefix, ...(key ? { [ATTR.keyHash]: memoKeyHash(key) } : {}) });
    setServerRoute(routeLabel(path));
    const method = f.req.method ?? 'GET';
    const leg = startClientSpan('passthrough.upstream', {
      'http.request.method': method,
      'server.address': hostname,
      'server.port': Number(port),
      'url.full': redactQuery(`${target.protocol}//${target.host}${basePath}${path}${query}`),
      [ATTR.passthroughPrefix]: f.prefix,
    });
    if (!leg) return;
    f.span = leg.span;
    for (const name in leg.headers) outHeaders.push(name, leg.headers[name]!);
  };

  return {
    proxy,
    handle: (req, res, next) => {
      if (!proxy(req, res)) next();
    },
    get inFlight() {
      return inFlight;
    },
    close() {
      watch?.stop();
      agent.destroy();
    },
  };
}

/** Ends the upstream leg's span: failed when the upstream did not answer, timed out, cut the response or answered 5xx. */
function endLeg(span: Span, outcome: PassthroughOutcome, status: number): void {
  span.setAttribute(ATTR.passthroughOutcome, outcome);
  if (outcome === 'upstream_unreachable' || outcome === 'upstream_timeout' || outcome === 'upstream_reset')
    failSpan(span, { code: outcome });
  else if (status >= 500) failSpan(span, { code: String(status) });
  span.end();
}

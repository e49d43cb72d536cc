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
 * response; upstream silence is found by one sweep per gateway (`SilenceWatch`). The parts live in
 * `passthrough/`: paths, headers, the record and its pump, the silence watch, the upstream target
 * and its leg, the spans.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import type { Logger } from '../lib/logger';
import { activeSpanContext, tracingOn } from '../lib/spans';
import { requestIdOf } from './http';
import { Flight, reply } from './passthrough/flight';
import { DROP_UPSTREAM, DROP_UPSTREAM_TRACED, copyRequestHeaders, upstreamHeaders } from './passthrough/headers';
import type { CopiedRequestHeaders } from './passthrough/headers';
import { foldSlashes, hasDotSegment, passthroughPrefix, splitUrl } from './passthrough/paths';
import { SilenceWatch } from './passthrough/silence-watch';
import { endLeg, traceLeg } from './passthrough/tracing';
import { upstreamTarget } from './passthrough/upstream';
import { upstreamLeg } from './passthrough/upstream-leg';

export { hasDotSegment, passthroughPrefix } from './passthrough/paths';

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

export function createPassthrough(opts: PassthroughOptions): Passthrough {
  const target = upstreamTarget(opts.upstreamUrl);
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
  const forward = upstreamLeg(target, log, watch);

  /** The request's record, counted in flight until its client response closes. */
  const open = (prefix: PassthroughPrefix, req: IncomingMessage, res: ServerResponse, copied: CopiedRequestHeaders) => {
    const f = new Flight(prefix, req, res, requestIdOf(copied.givenId));
    f.authorization = copied.authorization;
    f.userAgent = copied.userAgent;
    f.traceparent = copied.traceparent;
    if (traced) {
      const sc = activeSpanContext();
      f.tracedId = sc?.traceId;
      f.spanId = sc?.spanId;
    }
    inFlight += 1;
    // 'close' comes once per response: `on` spares the once-wrapper.
    res.on('close', () => settle(f));
    return f;
  };

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

  const proxy = (req: IncomingMessage, res: ServerResponse): boolean => {
    const url = req.url ?? '/';
    const prefix = passthroughPrefix(url);
    if (!prefix) return false;
    const copied = copyRequestHeaders(req.rawHeaders, dropUpstream);
    const f = open(prefix, req, res, copied);
    // Read now, a bad path's too: Node keeps the peer's address once read, and the access line
    // reads it after the response, when the socket may be gone.
    const remote = req.socket.remoteAddress;
    const { path: asSent, query } = splitUrl(url);
    if (hasDotSegment(asSent)) {
      f.outcome = 'bad_path';
      reply(f, 400, 'Path segments "." and ".." are not allowed');
      return true;
    }
    const path = foldSlashes(asSent);
    const headers = upstreamHeaders(copied, target.url.host, f.requestId, remote, req.socket);
    if (traced) traceLeg(f, target, path, query, headers);
    forward(f, target.basePath + path + query, headers, copied.body);
    return true;
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
      target.agent.destroy();
    },
  };
}

/** One proxied request's record (also its settled event), and the two ways bytes reach the client. */
import type http from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import type { Readable, Writable } from 'node:stream';
import { traceIdOf } from '../../lib/spans';
import type { Span } from '../../lib/spans';
import type { PassthroughEvent, PassthroughOutcome, PassthroughPrefix } from '../passthrough';

export class Flight implements PassthroughEvent {
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
 * with the source; failures are the pipe's close and error handlers'. Each chunk counts as
 * upstream activity for `f`.
 */
export function pump(f: Flight, from: Readable, to: Writable): void {
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

/** A `{detail}` answer from the gateway itself (the upstream never answered). */
export function reply(f: Flight, status: number, detail: string): void {
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

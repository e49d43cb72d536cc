/**
 * The header lists of both legs, copied from Node's raw lists in one pass each: hop-by-hop headers
 * (RFC 9110 §7.6.1) and those a `Connection` value names are left out; the pipe adds its own.
 */
import type { Socket } from 'node:net';

/** Hop-by-hop headers (RFC 9110 §7.6.1): never forwarded on either leg. */
const HOP_BY_HOP = [
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'upgrade',
];
/** Hop-by-hop, plus what the pipe sets itself on the upstream leg. */
export const DROP_UPSTREAM: ReadonlySet<string> = new Set([
  ...HOP_BY_HOP,
  'host',
  'x-request-id',
  'x-forwarded-for',
  'x-forwarded-proto',
  'x-forwarded-host',
]);
/** With tracing on the propagator writes the trace context of the upstream leg's own span: the caller's is not copied. */
export const DROP_UPSTREAM_TRACED: ReadonlySet<string> = new Set([...DROP_UPSTREAM, 'traceparent', 'tracestate', 'baggage']);
/** Hop-by-hop, plus the framing Node re-chooses for the client connection. */
const DROP_DOWNSTREAM = new Set([...HOP_BY_HOP, 'transfer-encoding']);
/** Connection values that name no other header (the common case: no second pass). */
const PLAIN_CONNECTION = /^\s*(keep-alive|close)\s*$/i;
/** End-to-end headers a client may not strip by naming them in Connection. */
const NEVER_NAMED = new Set(['authorization', 'content-length', 'content-type']);

/** Drops from a raw header list the headers a Connection value names (rare: only when it names any). */
function dropNamed(raw: string[], connection: string | undefined): string[] {
  if (!connection || PLAIN_CONNECTION.test(connection)) return raw;
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

/** A client request's headers as copied: the end-to-end ones, and what the pipe reads from the rest. */
export interface CopiedRequestHeaders {
  /** End-to-end headers as sent (before the Connection-named ones are dropped). */
  readonly headers: string[];
  readonly connection?: string;
  readonly givenId?: string;
  /** Every `X-Forwarded-For` value, joined. */
  readonly xff?: string;
  readonly proto?: string;
  readonly host?: string;
  readonly fwdHost?: string;
  readonly authorization?: string;
  readonly userAgent?: string;
  readonly traceparent?: string;
  /** Whether a body follows (a non-zero length, or chunked). */
  readonly body: boolean;
}

/** One pass over the client's raw list: `drop` names what is not copied (hop-by-hop and what the pipe sets). */
export function copyRequestHeaders(raw: string[], drop: ReadonlySet<string>): CopiedRequestHeaders {
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
    if (!drop.has(lower)) {
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
  return { headers, connection, givenId, xff, proto, host, fwdHost, authorization, userAgent, traceparent, body };
}

/** The upstream leg's list: the copied headers, then the upstream's `host`, the request id and `x-forwarded-*`. */
export function upstreamHeaders(
  c: CopiedRequestHeaders,
  upstreamHost: string,
  requestId: string,
  remote: string | undefined,
  socket: Socket,
): string[] {
  const out = dropNamed(c.headers, c.connection);
  out.push('host', upstreamHost, 'x-request-id', requestId);
  if (remote) out.push('x-forwarded-for', c.xff === undefined ? remote : `${c.xff}, ${remote}`);
  out.push('x-forwarded-proto', c.proto ?? ((socket as { encrypted?: boolean }).encrypted ? 'https' : 'http'));
  if (c.fwdHost ?? c.host) out.push('x-forwarded-host', (c.fwdHost ?? c.host)!);
  return out;
}

/**
 * The client's list from the upstream's raw one; `requestId` is added unless the upstream sent its
 * own, which is then the id the client and the access line get (returned).
 */
export function downstreamHeaders(raw: string[], requestId: string): { headers: string[]; requestId: string } {
  const out: string[] = [];
  let connection: string | undefined;
  let upstreamId: string | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    const lower = raw[i]!.toLowerCase();
    if (lower === 'connection') connection = raw[i + 1];
    else if (lower === 'x-request-id') upstreamId ??= raw[i + 1];
    if (!DROP_DOWNSTREAM.has(lower)) out.push(raw[i]!, raw[i + 1]!);
  }
  const headers = dropNamed(out, connection);
  if (!upstreamId) headers.push('x-request-id', requestId);
  return { headers, requestId: upstreamId || requestId };
}

/**
 * W3C Trace Context (`traceparent`) for upstream calls: a call made for a request or a session
 * carries the caller's trace id with a fresh span id, so the upstream's logs join ours.
 */
import { randomBytes } from 'node:crypto';

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/** The trace id of a well-formed `traceparent` (version 00, ids not all zero); undefined otherwise. */
export function traceIdOf(traceparent: string | undefined): string | undefined {
  const m = traceparent ? TRACEPARENT.exec(traceparent.trim().toLowerCase()) : null;
  if (!m || /^0+$/.test(m[1]!) || /^0+$/.test(m[2]!)) return undefined;
  return m[1];
}

/** A new trace id (16 random bytes, hex). */
export function newTraceId(): string {
  return randomBytes(16).toString('hex');
}

/** A `traceparent` for one upstream call in trace `traceId` (a new span, sampled flag set). */
export function childTraceparent(traceId: string): string {
  return `00-${traceId}-${randomBytes(8).toString('hex')}-01`;
}

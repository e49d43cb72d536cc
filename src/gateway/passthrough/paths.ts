/** Which request URLs the passthrough takes, and the paths it will not forward. */
import type { PassthroughPrefix } from '../passthrough';

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

/** A raw request URL's path and its query (`?` included, or empty). */
export function splitUrl(url: string): { path: string; query: string } {
  const q = url.indexOf('?');
  return q < 0 ? { path: url, query: '' } : { path: url.slice(0, q), query: url.slice(q) };
}

/** `base + path` clients produce double slashes: folded in the path, never in the query. */
export function foldSlashes(path: string): string {
  return path.includes('//') ? path.replace(/\/{2,}/g, '/') : path;
}

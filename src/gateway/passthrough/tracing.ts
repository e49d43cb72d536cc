/** The passthrough's spans (tracing on): the server span's attributes and the upstream leg's own span. */
import { memoKeyHash } from '../../lib/keys';
import { parseBearer } from '../../lib/bearer';
import { ATTR, activeSpan, failSpan, setServerRoute, startClientSpan } from '../../lib/spans';
import type { Span } from '../../lib/spans';
import type { PassthroughOutcome } from '../passthrough';
import { redactQuery, routeLabel } from '../telemetry/http';
import type { Flight } from './flight';
import type { UpstreamTarget } from './upstream';

/**
 * The server span (the http instrumentation's) gets the route, the prefix and the caller's key
 * hash; the upstream leg is its child `passthrough.upstream`, whose trace context goes upstream in
 * place of the caller's (appended to `outHeaders`).
 */
export function traceLeg(f: Flight, target: UpstreamTarget, path: string, query: string, outHeaders: string[]): void {
  const server = activeSpan();
  const key = parseBearer(f.authorization);
  server?.setAttributes({ [ATTR.passthroughPrefix]: f.prefix, ...(key ? { [ATTR.keyHash]: memoKeyHash(key) } : {}) });
  setServerRoute(routeLabel(path));
  const method = f.req.method ?? 'GET';
  const { url, basePath } = target;
  const leg = startClientSpan('passthrough.upstream', {
    'http.request.method': method,
    'server.address': target.hostname,
    'server.port': Number(target.port),
    'url.full': redactQuery(`${url.protocol}//${url.host}${basePath}${path}${query}`),
    [ATTR.passthroughPrefix]: f.prefix,
  });
  if (!leg) return;
  f.span = leg.span;
  for (const name in leg.headers) outHeaders.push(name, leg.headers[name]!);
}

/** Ends the upstream leg's span: failed when the upstream did not answer, timed out, cut the response or answered 5xx. */
export function endLeg(span: Span, outcome: PassthroughOutcome, status: number): void {
  span.setAttribute(ATTR.passthroughOutcome, outcome);
  if (outcome === 'upstream_unreachable' || outcome === 'upstream_timeout' || outcome === 'upstream_reset')
    failSpan(span, { code: outcome });
  else if (status >= 500) failSpan(span, { code: String(status) });
  span.end();
}

/**
 * The upstream leg of a proxied request: sent, its response's headers filtered and its body pumped
 * to the client, its failures turned into a `{detail}` answer (502 / 504) or a cut response.
 */
import type http from 'node:http';
import type { IncomingMessage } from 'node:http';
import { performance } from 'node:perf_hooks';
import type { Logger } from '../../lib/logger';
import { redactQuery } from '../telemetry/http';
import { pump, reply } from './flight';
import type { Flight } from './flight';
import { downstreamHeaders } from './headers';
import type { SilenceWatch } from './silence-watch';
import type { UpstreamTarget } from './upstream';

/** The function that sends a request upstream (`path`: the base path, the request's and its query) and wires up both legs. */
export function upstreamLeg(
  target: UpstreamTarget,
  log: Logger,
  watch: SilenceWatch | undefined,
): (f: Flight, path: string, headers: string[], body: boolean) => void {
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
    const out = downstreamHeaders(up.rawHeaders, f.requestId);
    f.requestId = out.requestId;
    res.writeHead(up.statusCode ?? 502, up.statusMessage || undefined, out.headers);
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

  /** Sends the request upstream (`path`: the base path, the request's and its query) and wires up both legs. */
  const forward = (f: Flight, path: string, headers: string[], body: boolean) => {
    let up: http.ClientRequest;
    try {
      up = target.request({
        agent: target.agent,
        hostname: target.hostname,
        port: target.port,
        method: f.req.method,
        path,
        // A raw list: Node writes it as given (no per-header setHeader, no Host added).
        headers: headers as unknown as http.OutgoingHttpHeaders,
      });
    } catch (err) {
      f.outcome = 'upstream_unreachable';
      log.error({ err, reqId: f.requestId, url: redactQuery(f.req.url ?? '/') }, 'passthrough failed before proxying');
      reply(f, 502, 'Upstream unreachable');
      return;
    }
    f.upstream = up;
    up.on('response', (upRes: IncomingMessage) => respond(f, upRes));
    up.on('error', (err: NodeJS.ErrnoException) => failed(f, err));
    // Silence before headers, between body chunks either way: the watch's sweep.
    watch?.add(f);
    if (!body) up.end();
    else pump(f, f.req, up);
  };

  return forward;
}

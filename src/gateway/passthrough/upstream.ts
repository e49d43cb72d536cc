/** The upstream as the pipe addresses it: parsed once from its URL, with its one connection pool. */
import http from 'node:http';
import https from 'node:https';

export interface UpstreamTarget {
  readonly url: URL;
  readonly request: typeof http.request;
  readonly agent: http.Agent;
  /** Without IPv6 brackets, as `http.request` takes it. */
  readonly hostname: string;
  readonly port: string | number;
  /** The URL's path without trailing slashes: prefixed to every forwarded path. */
  readonly basePath: string;
}

export function upstreamTarget(upstreamUrl: string): UpstreamTarget {
  const url = new URL(upstreamUrl);
  const secure = url.protocol === 'https:';
  // Idle pooled sockets are closed before a typical upstream's keep-alive timeout (5 s in Node),
  // so a request never lands on a socket the upstream is closing.
  const agentOpts = { keepAlive: true, timeout: 4000, scheduling: 'lifo' as const, noDelay: true };
  return {
    url,
    request: secure ? https.request : http.request,
    agent: secure ? new https.Agent(agentOpts) : new http.Agent(agentOpts),
    hostname: url.hostname.replace(/^\[|\]$/g, ''),
    port: url.port || (secure ? 443 : 80),
    basePath: url.pathname.replace(/\/+$/, ''),
  };
}

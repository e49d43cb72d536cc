/** Test doubles for gateway suites: a scripted raw upstream, and a gateway in front of any upstream. */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { closeServer } from '../../src/lib/listen';
import { createLogger } from '../../src/lib/logger';
import type { Logger } from '../../src/lib/logger';
import { startGateway } from '../../src/gateway/server';
import type { RunningGateway } from '../../src/gateway/server';
import { FAST_RETRY, testConfig } from '../helpers/config';

export interface RawUpstream {
  url: string;
  server: http.Server;
  close(): Promise<void>;
}

/** An upstream whose every request is answered by `handler` (scripted timing, resets, headers). */
export async function startRawUpstream(handler: http.RequestListener): Promise<RawUpstream> {
  const server = http.createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    server,
    close: () => {
      server.closeAllConnections();
      return closeServer(server);
    },
  };
}

/** A gateway (no emulator) in front of `upstreamUrl`. */
export function gatewayOn(upstreamUrl: string, overrides: Record<string, unknown> = {}, logger?: Logger): Promise<RunningGateway> {
  const cfg = testConfig({ shutdownGraceMs: 2000 }, overrides);
  return startGateway(cfg, logger ?? createLogger(cfg.logLevel), upstreamUrl, { retry: FAST_RETRY });
}

/** Raw HTTP/1.1 exchange (fetch forbids hop-by-hop request headers). */
export function rawRequest(
  url: string,
  opts: { method?: string; path: string; headers?: Record<string, string>; body?: string },
): Promise<{ status: number; headers: http.IncomingHttpHeaders; rawHeaders: string[]; body: string }> {
  return new Promise((resolve, reject) => {
    const u = new URL(url);
    const req = http.request(
      { host: u.hostname, port: u.port, method: opts.method ?? 'GET', path: opts.path, headers: opts.headers, agent: false },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (body += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, rawHeaders: res.rawHeaders, body }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(opts.body);
  });
}

/**
 * A test double of the upstream: a proxy on 127.0.0.1:0 in front of a real emulator that passes
 * every exchange through, except what `rewrite` changes (a dropped field, an SSE body without its
 * [DONE]): one broken assumption at a time.
 */
import http from 'node:http';
import { closeServer, listen } from '../../src/lib/listen';

export interface Exchange {
  method: string;
  /** Path and query as the client sent them. */
  path: string;
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** Returns the exchange as the client should see it (the upstream's answer by default). */
export type Rewrite = (ex: Exchange) => Exchange;

const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'content-length', 'content-encoding']);

export interface Double {
  url: string;
  close(): Promise<void>;
}

export async function startDouble(upstreamUrl: string, rewrite: Rewrite): Promise<Double> {
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(req.headers)) if (typeof v === 'string' && !HOP_BY_HOP.has(k) && k !== 'host') headers[k] = v;
      const body = chunks.length ? Buffer.concat(chunks) : undefined;
      fetch(`${upstreamUrl}${req.url ?? '/'}`, { method: req.method, headers, body })
        .then(async (up) => {
          const out: Record<string, string> = {};
          up.headers.forEach((v, k) => {
            if (!HOP_BY_HOP.has(k)) out[k] = v;
          });
          const ex = rewrite({ method: req.method ?? 'GET', path: req.url ?? '/', status: up.status, headers: out, body: await up.text() });
          res.writeHead(ex.status, ex.headers);
          res.end(ex.body);
        })
        .catch(() => {
          res.writeHead(502);
          res.end();
        });
    });
  });
  const port = await listen(server, 0, '127.0.0.1');
  return { url: `http://127.0.0.1:${port}`, close: () => closeServer(server) };
}

/** Rewrites the JSON body of the exchanges `match` selects. */
export function editJson(match: (ex: Exchange) => boolean, edit: (body: Record<string, unknown>) => void): Rewrite {
  return (ex) => {
    if (!match(ex)) return ex;
    const body = JSON.parse(ex.body) as Record<string, unknown>;
    edit(body);
    return { ...ex, body: JSON.stringify(body) };
  };
}

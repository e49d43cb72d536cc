/**
 * The passthrough bench's peer: the least a Node proxy can do (`node:http` server, keep-alive
 * agent, headers copied as parsed, `pipe()` both ways, 502 on error). No request id, no logs, no
 * metrics, no hop-by-hop stripping: the floor the gateway's cost per request is compared with.
 *
 * `node dist-bench/bench/bare-proxy.js <port> <upstream url>`; prints `listening <port>` when ready.
 */
import http from 'node:http';

export function startBareProxy(port: number, upstream: string): http.Server {
  const target = new URL(upstream);
  const agent = new http.Agent({ keepAlive: true, timeout: 4000, scheduling: 'lifo', noDelay: true });
  const server = http.createServer((req, res) => {
    const up = http.request(
      { hostname: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers, agent },
      (upRes) => {
        res.writeHead(upRes.statusCode ?? 502, upRes.headers);
        upRes.pipe(res);
      },
    );
    up.on('error', () => {
      if (res.headersSent) res.destroy();
      else res.writeHead(502).end();
    });
    res.on('close', () => {
      if (!res.writableFinished) up.destroy();
    });
    req.pipe(up);
  });
  return server.listen(port, '127.0.0.1', () => console.log(`listening ${port}`));
}

if (require.main === module) {
  startBareProxy(Number(process.argv[2]), process.argv[3]!);
  // An orderly exit on the bench's SIGTERM, so `--cpu-prof` (BENCH_PT_BARE_NODE_ARGS) gets written.
  process.once('SIGTERM', () => process.exit(0));
}

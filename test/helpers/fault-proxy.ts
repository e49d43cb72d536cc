/**
 * A TCP proxy on loopback that injects network faults between one process and a dependency (a
 * replica and Redis, a replica and the upstream) with real sockets, without root or namespaces:
 *   - `pass`: bytes flow as they come;
 *   - `delay`: every chunk, both ways, waits `delayMs` (order kept): a slow dependency;
 *   - `blackhole`: connections stay open and bytes go nowhere (a partition a TCP stack cannot see);
 *   - `cut`: every connection is closed and new ones are closed at once (a partition the peers notice).
 * Bytes held by a blackhole are dropped, as a real partition drops them; a mode change applies to
 * open connections at once.
 */
import net from 'node:net';

export type FaultMode = { kind: 'pass' } | { kind: 'delay'; delayMs: number } | { kind: 'blackhole' } | { kind: 'cut' };

export interface FaultProxy {
  /** Where to connect instead of the target. */
  port: number;
  readonly mode: FaultMode;
  set(mode: FaultMode): void;
  /** Connections open through the proxy now. */
  readonly connections: number;
  close(): Promise<void>;
}

/** Forwards `from` to `to` under the proxy's current mode; a delayed chunk keeps its place in line. */
function pipe(from: net.Socket, to: net.Socket, mode: () => FaultMode): void {
  let chain = Promise.resolve();
  from.on('data', (chunk: Buffer) => {
    const m = mode();
    if (m.kind === 'blackhole' || m.kind === 'cut') return;
    if (m.kind === 'pass') {
      chain = chain.then(() => void (to.destroyed || to.write(chunk)));
      return;
    }
    chain = chain.then(
      () =>
        new Promise<void>((resolve) => {
          setTimeout(() => {
            if (!to.destroyed) to.write(chunk);
            resolve();
          }, m.delayMs);
        }),
    );
  });
}

export async function startFaultProxy(target: { host?: string; port: number }): Promise<FaultProxy> {
  let mode: FaultMode = { kind: 'pass' };
  const open = new Set<net.Socket>();
  /** Both ends of every proxied connection: closed with the proxy. */
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    if (mode.kind === 'cut') return void client.destroy();
    const upstream = net.connect(target.port, target.host ?? '127.0.0.1');
    open.add(client);
    sockets.add(client).add(upstream);
    const done = () => {
      open.delete(client);
      sockets.delete(client);
      sockets.delete(upstream);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', done).on('close', done);
    upstream.on('error', done).on('close', done);
    pipe(client, upstream, () => mode);
    pipe(upstream, client, () => mode);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const port = (server.address() as net.AddressInfo).port;
  return {
    port,
    get mode() {
      return mode;
    },
    set(next) {
      mode = next;
      if (next.kind === 'cut') for (const s of [...open]) s.destroy();
    },
    get connections() {
      return open.size;
    },
    async close() {
      for (const s of [...sockets]) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** A fault proxy in front of `url` (a `redis://` or `http://` address), and the same URL through it. */
export async function proxyInFront(url: string): Promise<{ proxy: FaultProxy; url: string }> {
  const u = new URL(url);
  const proxy = await startFaultProxy({ host: u.hostname, port: Number(u.port) });
  return { proxy, url: `${u.protocol}//127.0.0.1:${proxy.port}` };
}

import net from 'node:net';
import { startFaultProxy } from '../helpers/fault-proxy';
import type { FaultProxy } from '../helpers/fault-proxy';

/** An echo server: what the proxy forwards comes back. */
let echo: net.Server;
let proxy: FaultProxy;
const echoed = new Set<net.Socket>();

beforeAll(async () => {
  echo = net.createServer((s) => {
    echoed.add(s);
    s.on('error', () => undefined).on('close', () => echoed.delete(s));
    s.pipe(s);
  });
  await new Promise<void>((r) => echo.listen(0, '127.0.0.1', () => r()));
  proxy = await startFaultProxy({ port: (echo.address() as net.AddressInfo).port });
});
afterAll(async () => {
  await proxy.close();
  for (const s of echoed) s.destroy();
  await new Promise<void>((r) => echo.close(() => r()));
});

function connect(): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const s = net.connect(proxy.port, '127.0.0.1', () => resolve(s));
    s.once('error', reject);
  });
}

/** The next data on `s`, or 'silence' when `ms` pass first. */
function next(s: net.Socket, ms: number): Promise<string> {
  return new Promise((resolve) => {
    const t = setTimeout(() => (s.off('data', on), resolve('silence')), ms);
    const on = (d: Buffer) => (clearTimeout(t), resolve(d.toString()));
    s.once('data', on);
  });
}

test('pass forwards both ways', async () => {
  proxy.set({ kind: 'pass' });
  const s = await connect();
  s.write('a');
  expect(await next(s, 5_000)).toBe('a');
  s.destroy();
});

test('delay holds each chunk at least the delay, in order', async () => {
  proxy.set({ kind: 'delay', delayMs: 150 });
  const s = await connect();
  const t0 = Date.now();
  s.write('1');
  let got = '';
  while (got.length < 2) {
    if (got === '1') s.write('2');
    got += await next(s, 5_000);
  }
  // Two trips through the proxy (there and back), each chunk held 150 ms: a floor, never a ceiling.
  expect(Date.now() - t0).toBeGreaterThanOrEqual(2 * 2 * 150 - 10);
  expect(got).toBe('12');
  s.destroy();
});

test('blackhole keeps the connection open and drops the bytes; pass again carries new ones', async () => {
  proxy.set({ kind: 'blackhole' });
  const s = await connect();
  s.write('lost');
  expect(await next(s, 300)).toBe('silence');
  expect(s.destroyed).toBe(false);
  proxy.set({ kind: 'pass' });
  s.write('back');
  expect(await next(s, 5_000)).toBe('back');
  s.destroy();
});

test('cut closes open connections and new ones until it is lifted', async () => {
  proxy.set({ kind: 'pass' });
  const s = await connect();
  const closed = new Promise<string>((r) =>
    s.once('error', (e: NodeJS.ErrnoException) => r(e.code ?? 'error')).once('close', () => r('closed')),
  );
  proxy.set({ kind: 'cut' });
  expect(['ECONNRESET', 'closed']).toContain(await closed);
  const refused = await connect().then(
    (c) => new Promise<string>((r) => c.once('error', (e: NodeJS.ErrnoException) => r(e.code ?? 'error')).once('close', () => r('closed'))),
    (e: NodeJS.ErrnoException) => e.code ?? 'error',
  );
  expect(['ECONNRESET', 'closed']).toContain(refused);
  proxy.set({ kind: 'pass' });
  const again = await connect();
  again.write('ok');
  expect(await next(again, 5_000)).toBe('ok');
  again.destroy();
  expect(proxy.connections).toBeLessThanOrEqual(1);
});

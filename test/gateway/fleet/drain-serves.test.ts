/**
 * What a draining replica does while its connections last, on real processes (redis-server, the
 * emulator, replicas A and B). After SIGTERM, A answers /readyz 503 (the balancer sends no new
 * work) and closes its idle keep-alive connections, stays a live member of the fleet (it keeps
 * heartbeating: B neither declares it dead nor takes its streams as a failover), hands the
 * scheduling of its streams to B, and keeps every results socket open and fed. Whatever still
 * reaches it is served, not refused: a keepalive, a prompt change (used from the next results on),
 * a new results socket for an existing stream. Requests here go straight to A, standing for those
 * already on their way when the balancer took A out. `/metrics` shows the drain
 * (`gateway_drain_active`, `gateway_drain_held_connections{kind}`, `gateway_drain_seconds_left`).
 * A exits 0 once its last socket is gone.
 */
import net from 'node:net';
import { createStream } from '../../helpers/fleet';
import { openResults } from '../../helpers/results-socket';
import { KEY, deadline, frameBody, http, ownerOf, resultsAfter, until, useFleet } from './fleet-test';

const fleet = useFleet({ ids: ['A', 'B'] });

/** A keep-alive HTTP/1.1 connection that made one request and now idles; resolves when the server closes it. */
async function idleKeepAlive(url: string): Promise<{ closed: Promise<void> }> {
  const { hostname, port } = new URL(url);
  const sock = net.connect(Number(port), hostname);
  const closed = new Promise<void>((resolve) => sock.once('close', () => resolve()));
  await new Promise<void>((resolve, reject) => {
    sock.once('error', reject);
    sock.once('data', () => resolve());
    sock.write(`GET /healthz HTTP/1.1\r\nHost: ${hostname}\r\nConnection: keep-alive\r\n\r\n`);
  });
  return { closed };
}

/** One sample of a replica's /metrics, by series (`name{labels}` as printed). */
async function metrics(url: string): Promise<Map<string, number>> {
  const text = await fetch(`${url}/metrics`).then((r) => r.text());
  return new Map([...text.matchAll(/^(gateway_[a-z_]+(?:\{[^}]*\})?) (\S+)$/gm)].map((m) => [m[1]!, Number(m[2])]));
}

test('a draining replica keeps serving what reaches it, stays in the fleet, shows the drain in /metrics, and exits once its sockets are gone', async () => {
  const [a, b] = [fleet().replica('A'), fleet().replica('B')];
  const c = await createStream(a.url, KEY, frameBody({ interval_seconds: 0.5 }));
  expect(c.status).toBe(201);
  const id = c.id!;
  const s = await openResults(a.url, id, KEY, { waitMs: null });
  await deadline(s.waitFor(2), 30_000, 'first results');
  const idle = await idleKeepAlive(a.url);
  const beatBefore = Number(await fleet().redisCall('ZSCORE', 'lg:replicas', 'A'));

  const termAt = Date.now();
  a.kill('SIGTERM');
  await deadline(idle.closed, 10_000, 'the idle keep-alive connection is closed');
  await deadline(resultsAfter(s, termAt, 2), 30_000, 'results during the drain');
  expect(a.running()).toBe(true);

  // Out of the balancer, still in the fleet; the stream's scheduling moved to B.
  const ready = await http(a.url, 'GET', '/readyz');
  expect(ready.status).toBe(503);
  expect(ready.body).toMatchObject({ draining: true });
  expect((await http(a.url, 'GET', '/healthz')).status).toBe(200);
  await deadline(
    until(async () => Number(await fleet().redisCall('ZSCORE', 'lg:replicas', 'A')) > beatBefore),
    10_000,
    'A heartbeats while draining',
  );
  expect(await ownerOf(fleet(), id)).toBe('B');
  expect((await metrics(b.url)).get('gateway_fleet_replicas')).toBe(2);

  // Served, not refused.
  const ka = await http(a.url, 'POST', `/v0.2/streams/${id}/keepalive`);
  expect(ka.status).toBe(200);
  expect(ka.body).toMatchObject({ status: 'ok', stream_id: id });
  const patched = await http(a.url, 'PATCH', `/v0.2/streams/${id}/config/prompt`, { body: { prompt: 'Changed while A drains' } });
  expect(patched.status).toBe(200);
  await deadline(
    until(() => s.received.some((r) => r.message.prompt === 'Changed while A drains')),
    15_000,
    'the new prompt in the results',
  );
  const late = await openResults(a.url, id, KEY, { waitMs: null });
  await deadline(late.waitFor(2), 30_000, 'a new socket on the draining replica gets results');

  const m = await metrics(a.url);
  expect(m.get('gateway_drain_active')).toBe(1);
  expect(m.get('gateway_drain_held_connections{kind="socket"}')).toBe(2);
  expect(m.get('gateway_drain_held_connections{kind="relay"}')).toBe(0);
  expect(m.get('gateway_drain_seconds_left')).toBeGreaterThan(0);
  expect(m.get('gateway_drain_seconds_left')).toBeLessThanOrEqual(3600);
  expect((await metrics(b.url)).get('gateway_drain_active')).toBe(0);

  // Gone once its last socket is.
  s.close();
  await deadline(resultsAfter(late, Date.now(), 1), 30_000, 'the other socket is unaffected');
  expect(a.running()).toBe(true);
  late.close();
  expect(await deadline(a.proc.exited, 30_000, 'A exits after its last socket')).toMatchObject({ code: 0 });
  expect((await http(b.url, 'DELETE', `/v0.2/streams/${id}`)).status).toBe(200);
}, 120_000);

/**
 * SIGTERM of a replica with Redis, on real processes: it hands its streams' scheduling to the
 * others and, holding no client connection, exits: no stream ends, sockets on the other replicas
 * stay open, at most one tick is missed per stream, nothing is published twice. The last replica
 * standing ends its streams as a single replica does. (A replica that holds connections keeps them
 * while it drains: rolling-deploy.test.ts, drain-serves.test.ts, drain-deadline.test.ts.)
 */
import { duplicateIds, missedTicks } from '../../helpers/fleet';
import { openResults } from '../../helpers/results-socket';
import { KEY, deadline, frameBody, http, ownerOf, resultsAfter, useFleet } from './fleet-test';

const fleet = useFleet();

test('SIGTERM hands the streams over: none ends, ≤ 1 missed tick each, zero duplicates', async () => {
  const [a, b, c] = [fleet().replica('A'), fleet().replica('B'), fleet().replica('C')];
  const ids: string[] = [];
  for (let i = 0; i < 4; i++) {
    const r = await http(c.url, 'POST', '/v0.2/streams', { body: frameBody({ interval_seconds: 1 }) });
    expect(r.status).toBe(201);
    ids.push((r.body as { stream_id: string }).stream_id);
  }
  const sockets = await Promise.all(ids.map((id, i) => openResults((i % 2 ? a : b).url, id, KEY, { waitMs: null })));
  await deadline(Promise.all(sockets.map((s) => s.waitFor(3))), 30_000, 'first results');

  const termAt = Date.now();
  c.kill('SIGTERM');
  const exit = await deadline(c.proc.exited, 30_000, 'the drained replica exits');
  expect(exit.code).toBe(0);
  await deadline(Promise.all(sockets.map((s) => resultsAfter(s, termAt, 4))), 30_000, 'results after the handover');

  for (const [i, id] of ids.entries()) {
    const rec = (await fleet().session(id))!;
    expect(rec.state).toBe('active');
    expect(['A', 'B']).toContain(await ownerOf(fleet(), id));
    const s = sockets[i]!;
    expect(s.isOpen()).toBe(true);
    expect(duplicateIds(s.received)).toEqual([]);
    expect(missedTicks(s.received, id).length).toBeLessThanOrEqual(1);
  }
  // Sockets held on A and B would keep those replicas draining in the next test.
  for (const s of sockets) s.close();
  for (const id of ids) expect((await http(a.url, 'DELETE', `/v0.2/streams/${id}`)).status).toBe(200);
  await c.restart();
}, 180_000);

test('the last replica standing ends its streams as a single replica does (server_shutdown)', async () => {
  const [a, b, c] = [fleet().replica('A'), fleet().replica('B'), fleet().replica('C')];
  const r = await http(a.url, 'POST', '/v0.2/streams', { body: frameBody({ interval_seconds: 1 }) });
  const id = (r.body as { stream_id: string }).stream_id;
  for (const gone of [b, c]) {
    gone.kill('SIGTERM');
    expect((await deadline(gone.proc.exited, 30_000, `${gone.id} exits`)).code).toBe(0);
  }
  const sock = await openResults(a.url, id, KEY, { waitMs: null });
  await deadline(sock.waitFor(1), 30_000, 'a result on the last replica');
  a.kill('SIGTERM');
  expect(await deadline(sock.closed, 30_000, 'closed by the last replica')).toEqual({ code: 1001, reason: 'server_shutdown' });
  expect(await fleet().session(id)).toMatchObject({ state: 'ended', endReason: 'server_shutdown' });
}, 180_000);

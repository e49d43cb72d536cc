/**
 * A replica that lost a stream must not act for it afterwards, on real processes. The sequence:
 * replica X adopts a stream by handover; X is paused (SIGSTOP) past `deadAfterMs`, so Y claims it
 * by failover; X wakes and its stale copy stops (its tick is refused, `fenced`, or its reconcile
 * sees the new owner); then X is drained (SIGTERM). The stream lives on Y untouched: still active
 * in the store and upstream, results keep coming on Y's socket, the slot is still held, and nothing
 * ended it. Also: an upstream stream deleted behind the gateway's back ends the legacy stream as
 * `upstream_ended`, not as the client's request (`client_requested`) nor its lease (`lease_expired`).
 */
import { duplicateIds } from '../../helpers/fleet';
import { openResults } from '../../helpers/results-socket';
import type { Replica } from '../../helpers/fleet';
import { KEY, deadline, frameBody, http, ownerOf, resultsAfter, slotsOfKey, until, useFleet } from './fleet-test';

const fleet = useFleet();

const after = (s: { received: { atMs: number }[] }, t: number) => s.received.filter((r) => r.atMs > t).length;

/** The upstream's view of the stream (the emulator, with the client's key). */
async function upstreamState(streamId: string): Promise<unknown> {
  const r = await http(fleet().emulatorUrl, 'GET', `/v1beta/streams/${streamId}`);
  return r.status === 200 ? (r.body as { state: string }).state : r.status;
}

const ended = (r: Replica) => r.lines.filter((l) => l.msg === 'legacy stream ended');

test('a replica paused past failover, woken, then drained leaves the stream it lost alone', async () => {
  const [a, b, c] = [fleet().replica('A'), fleet().replica('B'), fleet().replica('C')];
  const created = await http(c.url, 'POST', '/v0.2/streams', { body: frameBody({ interval_seconds: 1 }) });
  expect(created.status).toBe(201);
  const id = (created.body as { stream_id: string }).stream_id;

  // C drains: the stream is handed over to A or B (X), which adopts it.
  c.kill('SIGTERM');
  expect((await deadline(c.proc.exited, 30_000, 'C exits')).code).toBe(0);
  await deadline(
    until(async () => ['A', 'B'].includes(await ownerOf(fleet(), id))),
    15_000,
    'handed over',
  );
  const x = fleet().replica(await ownerOf(fleet(), id));
  const y = x === a ? b : a;
  await deadline(x.line('legacy stream adopted'), 15_000, 'X adopted the stream');
  const onY = await openResults(y.url, id, KEY, { waitMs: null });
  await deadline(onY.waitFor(2), 30_000, 'first results on Y');
  expect(await slotsOfKey(fleet())).toBe(1);

  // X paused past deadAfterMs: Y claims the stream by failover.
  const stoppedAt = Date.now();
  x.kill('SIGSTOP');
  try {
    await deadline(
      until(async () => (await ownerOf(fleet(), id)) === y.id),
      30_000,
      'Y claimed the stream',
    );
    await deadline(resultsAfter(onY, stoppedAt, 2), 30_000, 'results from Y');
  } finally {
    x.kill('SIGCONT');
  }
  const epoch = Number((await fleet().session(id))!.epoch);
  expect(epoch).toBeGreaterThanOrEqual(3); // create 1, handover 2, failover 3

  // X wakes: its copy of the stream stops (a refused tick, or the owned-streams reconcile).
  const wokeAt = Date.now();
  await deadline(
    until(
      () => x.lines.some((l) => String(l.msg).startsWith('tick refused by the store') && l.streamId === id) || Date.now() - wokeAt > 12_000,
    ),
    20_000,
    'X noticed it lost the stream',
  );
  await deadline(resultsAfter(onY, wokeAt, 2), 30_000, 'results on Y after X woke');

  // X drains. The stream it lost must be left alone.
  const termAt = Date.now();
  x.kill('SIGTERM');
  expect((await deadline(x.proc.exited, 30_000, 'X exits')).code).toBe(0);
  await deadline(
    until(() => after(onY, termAt) >= 4 || !onY.isOpen()),
    30_000,
    'results on Y after X left',
  );

  expect(ended(y).map((l) => l.reason)).toEqual([]);
  expect(onY.isOpen()).toBe(true);
  expect(duplicateIds(onY.received)).toEqual([]);
  expect(await fleet().session(id)).toMatchObject({ state: 'active', owner: y.id, epoch });
  expect(await upstreamState(id)).toBe('active');
  expect(await slotsOfKey(fleet())).toBe(1);

  expect((await http(y.url, 'DELETE', `/v0.2/streams/${id}`)).status).toBe(200);
  expect(await deadline(onY.closed, 10_000, 'closed on Y')).toEqual({ code: 1001, reason: 'client_requested' });
  expect(await slotsOfKey(fleet())).toBe(0);
  await Promise.all([x.restart(), c.restart()]);
}, 240_000);

test("an upstream stream deleted behind the gateway's back ends as upstream_ended, not as the client's request or its lease", async () => {
  for (const r of fleet().replicas) if (!r.running()) await r.restart();
  const a = fleet().replica('A');
  const created = await http(a.url, 'POST', '/v0.2/streams', { body: frameBody({ interval_seconds: 1 }) });
  expect(created.status).toBe(201);
  const id = (created.body as { stream_id: string }).stream_id;
  const sock = await openResults(fleet().replica('B').url, id, KEY, { waitMs: null });
  await deadline(sock.waitFor(1), 30_000, 'first result');

  // Deleted upstream directly (not through the legacy DELETE): the next tick finds it gone.
  expect((await http(fleet().emulatorUrl, 'DELETE', `/v1beta/streams/${id}`)).status).toBe(200);
  const close = await deadline(sock.closed, 30_000, 'the stream ends');
  expect(close.code).toBe(1001);
  expect(close.reason).toBe('upstream_ended');
  expect(await fleet().session(id)).toMatchObject({ state: 'ended', endReason: close.reason });
  expect(await slotsOfKey(fleet())).toBe(0);
}, 120_000);

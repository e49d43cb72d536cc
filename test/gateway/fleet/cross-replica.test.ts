/**
 * Any replica, any call, on real processes: a stream created on A is served by B and C (results
 * sockets, keepalive with the exact cost since the previous keepalive wherever it was served,
 * prompt PATCH that the next tick uses, DELETE that closes every socket on every replica at once
 * and frees the slot once); reinfer of a result on the replicas that do not own its stream; 60
 * concurrent creates for one key over three replicas grant exactly 5.
 */
import { openResults } from '../../helpers/results-socket';
import type { Replica } from '../../helpers/fleet';
import type { ResultsSocket } from '../../helpers/results-socket';
import { KEY, KEY_B, deadline, frameBody, http, ownerOf, reinfer, slotsOfKey, tail, until, useFleet } from './fleet-test';

// A 4 fps publisher: one frame is 250 ms, so a reinfer's "within one frame" of its result holds
// however late a loaded machine lets the upstream resolve a tick's window after it was sent.
const fleet = useFleet({ publisher: { fps: 4, width: 160, height: 120 } });

/** Replicas A, B, C and a stream created on A (its owner). */
async function streamOnA(): Promise<{ a: Replica; b: Replica; c: Replica; id: string }> {
  const [a, b, c] = ['A', 'B', 'C'].map((r) => fleet().replica(r)) as [Replica, Replica, Replica];
  const created = await http(a.url, 'POST', '/v0.2/streams', { body: frameBody({ interval_seconds: 0.5 }) });
  expect(created.status).toBe(201);
  const id = (created.body as { stream_id: string }).stream_id;
  expect(await ownerOf(fleet(), id)).toBe('A');
  return { a, b, c, id };
}

test('create on A; sockets on A, B, C; keepalive on B then C; prompt on C; DELETE on B closes all', async () => {
  const { a, b, c, id } = await streamOnA();

  const sockets: ResultsSocket[] = await Promise.all([a, b, c].map((r) => openResults(r.url, id, KEY, { waitMs: null })));
  await deadline(Promise.all(sockets.map((s) => s.waitFor(2))), 20_000, 'first results on every replica');

  // Keepalive on B, then on C: each charges the time since the previous one, wherever it was served.
  const k1 = await http(b.url, 'POST', `/v0.2/streams/${id}/keepalive`);
  expect(k1.status).toBe(200);
  const k2 = await http(c.url, 'POST', `/v0.2/streams/${id}/keepalive`);
  expect(k2.status).toBe(200);
  const [s1, s2] = [k1.body, k2.body] as { seconds_charged: number; cost_cents: number; stream_id: string }[];
  expect(s2!.stream_id).toBe(id);
  // C's charge covers only the moment since B's keepalive, not the stream's life.
  expect(s2!.seconds_charged).toBeLessThanOrEqual(s1!.seconds_charged);

  // A prompt change through C reaches the owner A: a later result carries it.
  const patched = await http(c.url, 'PATCH', `/v0.2/streams/${id}/config/prompt`, { body: { prompt: 'Changed through C' } });
  expect(patched.status).toBe(200);
  await deadline(
    until(() => sockets[1]!.received.some((r) => r.message.prompt === 'Changed through C')),
    15_000,
    'a result with the new prompt',
  );
  const firstNew = sockets[1]!.received.findIndex((r) => r.message.prompt === 'Changed through C');
  // Once the new prompt is in use, no later result goes back to the old one.
  expect(sockets[1]!.received.slice(firstNew).every((r) => r.message.prompt === 'Changed through C')).toBe(true);

  // Feedback through C, listed through B.
  expect(
    (await http(c.url, 'POST', `/v0.2/streams/${id}/feedback`, { body: { rating: 4, category: 'fleet', feedback: 'via C' } })).status,
  ).toBe(200);
  expect((await http(b.url, 'GET', '/v0.2/streams/feedback')).body).toEqual(
    expect.arrayContaining([expect.objectContaining({ stream_id: id, feedback: 'via C' })]),
  );

  // A socket on B for another account is refused.
  const other = await openResults(b.url, id, KEY_B, { waitMs: null });
  expect((await deadline(other.closed, 10_000, 'the other account refused')).code).toBe(1008);

  // DELETE through B, a replica that does not own the stream: every socket on every replica closes.
  expect((await http(b.url, 'DELETE', `/v0.2/streams/${id}`)).status).toBe(200);
  const closes = await deadline(Promise.all(sockets.map((s) => s.closed)), 10_000, 'all sockets closed after DELETE on B');
  expect(closes).toEqual([0, 1, 2].map(() => ({ code: 1001, reason: 'client_requested' })));
  const rec = await fleet().session(id);
  expect(rec).toMatchObject({ state: 'ended', endReason: 'client_requested' });
  expect(await slotsOfKey(fleet())).toBe(0);
  // The upstream stream was deleted (by the replica that won the end), not left to its lease.
  const upstream = await http(fleet().emulatorUrl, 'GET', `/v1beta/streams/${id}`);
  expect(upstream.body).toMatchObject({ state: 'ended', end_reason: 'deleted' });
  // Ended once: a second DELETE on any replica answers 204.
  expect((await http(a.url, 'DELETE', `/v0.2/streams/${id}`)).status).toBe(204);
  expect((await http(c.url, 'DELETE', `/v0.2/streams/${id}`)).status).toBe(204);
}, 120_000);

test('60 concurrent creates for one key over three replicas: exactly 5, round after round', async () => {
  const urls = fleet().replicas.map((r) => r.url);
  for (let round = 0; round < 5; round++) {
    const answers = await Promise.all(
      Array.from({ length: 60 }, (_, i) =>
        http(urls[i % 3]!, 'POST', '/v0.2/streams', { key: KEY_B, body: frameBody({ interval_seconds: 5 }) }),
      ),
    );
    const made = answers.filter((r) => r.status === 201).map((r) => (r.body as { stream_id: string }).stream_id);
    expect(made).toHaveLength(5);
    expect(answers.filter((r) => r.status === 429 && (r.body as { error: string }).error === 'concurrent_stream_limit')).toHaveLength(55);
    expect(await slotsOfKey(fleet(), KEY_B)).toBe(5);
    // Ended through a replica other than the creator's (the next one round-robin).
    for (const [i, id] of made.entries())
      expect((await http(urls[(i + round + 1) % 3]!, 'DELETE', `/v0.2/streams/${id}`, { key: KEY_B })).status).toBe(200);
    expect(await slotsOfKey(fleet(), KEY_B)).toBe(0);
  }
}, 180_000);

test("reinfer on B and C of a result A delivered: the same frame; another account's key 404 there too", async () => {
  const { a, b, c, id } = await streamOnA();
  const sock = await openResults(a.url, id, KEY, { waitMs: null });
  await deadline(sock.waitFor(1), 20_000, 'a result on A');
  sock.close();
  const result = sock.received[0]!.message;
  const body = { result_id: result.id, prompt: 'Again, elsewhere', model: 'local/analyzer' };
  for (const r of [b, c]) {
    const res = await reinfer(r.url, body);
    expect(res.status).toBe(200);
    expect(Math.abs(tail((res.body as { content: string }).content).last - tail(result.result as string).last)).toBeLessThanOrEqual(1);
  }
  expect((await http(c.url, 'POST', '/v0.2/chat/completions/clip', { key: KEY_B, body })).status).toBe(404);
  expect((await http(b.url, 'DELETE', `/v0.2/streams/${id}`)).status).toBe(200);
}, 60_000);

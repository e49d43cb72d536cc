/**
 * A rolling deploy behind a real load balancer drops no connection, on real processes: three
 * replicas behind HAProxy (round robin, /readyz checks), native-source streams each watched by
 * three results sockets through the balancer, keepalives through the balancer all along. Each old
 * replica is replaced by a new one (started, counted up by the balancer, then the old one gets
 * SIGTERM): no socket closes, results keep coming on every socket with no stretch of the stream's
 * schedule over max(2 intervals, 2 s) without one (ticks read from the result ids, so a loaded
 * machine's late deliveries are not gaps) and no duplicate, no keepalive fails, every stream is still active
 * upstream and scheduled by a new replica after the deploy. Each old replica stays alive while it
 * holds a socket and exits (0) once its last socket is gone; one that holds none exits by itself.
 */
import { duplicateIds, longestGap, longestTickGap } from '../../helpers/fleet';
import { openResults } from '../../helpers/results-socket';
import type { ResultsSocket } from '../../helpers/results-socket';
import { replaceReplica } from '../../helpers/rolling';
import type { ReplacedReplica } from '../../helpers/rolling';
import { SERVED_BY, startHaproxy } from '../../helpers/haproxy';
import type { Balancer } from '../../helpers/haproxy';
import { KEY, deadline, frameBody, http, ownerOf, slotsOfKey, until, useFleet } from './fleet-test';
import { sleep } from '../../helpers/time';

const INTERVAL_S = 0.5;
/** The longest stretch of a stream's schedule without a result during the deploy. */
const GAP_BOUND_MS = Math.max(2 * INTERVAL_S * 1000, 2000);
const STREAMS = 4;
const SOCKETS_PER_STREAM = 3;

// A readiness delay, as behind any balancer (production's default is 5 s): /readyz answers 503 and
// the replica keeps serving until HAProxy's next check (200 ms) has counted it down, so no request
// is routed to a replica that has stopped taking them.
const fleet = useFleet({ env: { SHUTDOWN_DELAY_MS: '1000' } });
let lb: Balancer;

beforeAll(async () => {
  lb = await startHaproxy({ servers: fleet().replicas.map((r) => ({ name: r.id, url: r.url })) });
}, 60_000);

afterAll(async () => {
  await lb?.stop();
});

const servedBy = (s: ResultsSocket) => String(s.upgradeHeaders[SERVED_BY]);

/** Resolves once every socket has `n` more results; sockets that close instead fail with their closes. */
async function moreResults(sockets: ResultsSocket[], n: number): Promise<void> {
  const settled = await Promise.allSettled(sockets.map((s) => s.waitFor(s.received.length + n)));
  const failed = await Promise.all(
    sockets
      .filter((_, i) => settled[i]!.status === 'rejected')
      .map(async (s) => {
        const c = await s.closed;
        return `${s.streamId} on replica ${servedBy(s)}: ${c.code} ${c.reason}`;
      }),
  );
  if (failed.length) throw new Error(`sockets closed instead of receiving results:\n${failed.join('\n')}`);
}

test('rolling deploy of three replicas: no socket closes, results keep coming, old replicas exit once their last socket is gone', async () => {
  const ids: string[] = [];
  for (let i = 0; i < STREAMS; i++) {
    const r = await http(lb.url, 'POST', '/v0.2/streams', { body: frameBody({ interval_seconds: INTERVAL_S }) });
    expect(r.status).toBe(201);
    ids.push((r.body as { stream_id: string }).stream_id);
  }
  const sockets: ResultsSocket[] = [];
  for (let k = 0; k < SOCKETS_PER_STREAM; k++) for (const id of ids) sockets.push(await openResults(lb.url, id, KEY, { waitMs: null }));
  await deadline(Promise.all(sockets.map((s) => s.waitFor(2))), 30_000, 'first results on every socket');
  const closes: string[] = [];
  for (const s of sockets) void s.closed.then((c) => closes.push(`${s.streamId} on ${servedBy(s)}: ${c.code} ${c.reason}`));

  // A client keeps its streams alive through the balancer all along (the browser SDK treats any
  // failed keepalive as fatal).
  const keepalives: string[] = [];
  let keeping = true;
  const keepAlive = (async () => {
    while (keeping) {
      for (const id of ids) {
        const r = await http(lb.url, 'POST', `/v0.2/streams/${id}/keepalive`).catch((err: Error) => ({ status: 0, body: err.message }));
        if (r.status !== 200) keepalives.push(`${id}: ${r.status} ${JSON.stringify(r.body)}`);
      }
      await sleep(1000);
    }
  })();

  const steps: ReplacedReplica[] = [];
  try {
    for (const [old, next] of [
      ['A', 'D'],
      ['B', 'E'],
      ['C', 'F'],
    ] as const) {
      const step = await replaceReplica(fleet(), lb, old, next);
      steps.push(step);
      // Every socket, on the old replicas too, keeps receiving results after this SIGTERM.
      await deadline(moreResults(sockets, 3), 30_000, `results after the SIGTERM of ${old}`);
    }
  } finally {
    keeping = false;
    await keepAlive;
  }

  expect(closes).toEqual([]);
  expect(keepalives).toEqual([]);
  for (const s of sockets) {
    expect(s.isOpen()).toBe(true);
    expect(duplicateIds(s.received)).toEqual([]);
    expect(
      longestTickGap(
        s.received.map((r) => r.id),
        s.streamId,
      ) *
        INTERVAL_S *
        1000,
    ).toBeLessThanOrEqual(GAP_BOUND_MS);
  }
  // The figure with the delivery delays in (this machine's load): printed, not asserted.
  console.log(
    `rolling deploy: longest time between two results on a socket ${Math.max(...sockets.map((s) => longestGap(s.received, s.received[0]!.atMs)))} ms`,
  );
  const upstream = new Map((await fleet().upstreamStreams()).map((u) => [u.id, u.state]));
  for (const id of ids) {
    expect(upstream.get(id)).toBe('active');
    expect((await fleet().session(id))?.state).toBe('active');
    expect(['D', 'E', 'F']).toContain(await ownerOf(fleet(), id));
  }

  // Each old replica lives as long as a socket on it does, and exits once the last one is gone.
  for (const step of steps) {
    const mine = sockets.filter((s) => servedBy(s) === step.old.id);
    if (mine.length === 0) {
      expect(await deadline(step.exit, 30_000, `${step.old.id}, holding no socket, exits`)).toMatchObject({ code: 0 });
      continue;
    }
    expect(step.exited()).toBeUndefined();
    const closedAt = Date.now();
    for (const s of mine) s.close();
    const exit = await deadline(step.exit, 30_000, `${step.old.id} exits after its last socket closed`);
    expect(exit.code).toBe(0);
    expect(exit.atMs).toBeGreaterThanOrEqual(closedAt);
    // The sockets on the replicas still draining are unaffected.
    await deadline(
      moreResults(
        sockets.filter((s) => s.isOpen()),
        1,
      ),
      30_000,
      `results after ${step.old.id} exited`,
    );
  }

  // The streams live on the new replicas: a new socket gets results, DELETE ends them, nothing is left.
  const fresh = await openResults(lb.url, ids[0]!, KEY, { waitMs: null });
  await deadline(fresh.waitFor(2), 30_000, 'results on a socket opened after the deploy');
  for (const id of ids) expect((await http(lb.url, 'DELETE', `/v0.2/streams/${id}`)).status).toBe(200);
  expect(await deadline(fresh.closed, 30_000, 'the fresh socket closes at the end')).toEqual({ code: 1001, reason: 'client_requested' });
  await deadline(
    until(async () => (await slotsOfKey(fleet())) === 0),
    30_000,
    'slots released',
  );
  // The end's winner frees the slot first, then deletes the upstream stream.
  await deadline(
    until(async () => !(await fleet().upstreamStreams()).some((u) => ids.includes(u.id))),
    30_000,
    'the upstream streams deleted',
  );
}, 240_000);

/**
 * Which replica tells the balancer to route elsewhere: one that cannot reach the upstream while
 * another alive replica can. When every replica is cut, none does, so an upstream outage never
 * empties the balancer. Two fleet members over one MemoryStore, swept by hand on a fake clock.
 */
import { loadConfig } from '../../../src/config';
import { Fleet } from '../../../src/gateway/fleet/fleet';
import type { FleetSessions } from '../../../src/gateway/fleet/fleet';
import { MemoryStore } from '../../../src/gateway/store/memory';
import { createLogger } from '../../../src/lib/logger';
import { FakeClock, settle } from '../../helpers/fake-clock';

const idleSessions = (): FleetSessions => ({
  ownedIds: [],
  selfFenced: false,
  adopt: () => Promise.resolve(false),
  onOwnerMessage: () => Promise.resolve(),
  handOver: () => Promise.resolve(0),
  reconcileOwned: () => Promise.resolve(),
  halt: () => Promise.resolve(),
});

function twoReplicas() {
  const clock = new FakeClock(1_000_000);
  const store = new MemoryStore({ clock });
  const cut = { A: false, B: false };
  const member = (id: 'A' | 'B') =>
    new Fleet({
      store,
      replicaId: id,
      cfg: loadConfig({ env: {} }).store.fleet,
      sessions: idleSessions(),
      logger: createLogger('silent'),
      clock,
      upstreamImpaired: () => cut[id],
    });
  const a = member('A');
  const b = member('B');
  /** Both heartbeat, then sweep in the order given (each sweep reads what the earlier ones marked). */
  const sweep = async (...order: Fleet[]) => {
    await store.heartbeat('A');
    await store.heartbeat('B');
    for (const f of order) await f.sweep();
  };
  return { a, b, cut, sweep, store, clock };
}

test('a replica cut from the upstream yields while another reaches it, and stops yielding once it reaches it again', async () => {
  const { a, b, cut, sweep, store } = twoReplicas();
  await sweep(a, b);
  expect([a.yieldsToPeers, b.yieldsToPeers]).toEqual([false, false]);

  cut.A = true;
  await sweep(a, b);
  expect([a.yieldsToPeers, b.yieldsToPeers]).toEqual([true, false]);
  expect((await store.membership(3000)).impaired).toEqual(['A']);

  cut.A = false;
  await sweep(a, b);
  expect([a.yieldsToPeers, b.yieldsToPeers]).toEqual([false, false]);
});

test('when every replica is cut from the upstream, none yields once each has seen the others marked', async () => {
  const { a, b, cut, sweep } = twoReplicas();
  await sweep(a, b);
  cut.A = true;
  cut.B = true;
  // A sweeps first and still sees B reaching the upstream; B already sees A marked.
  await sweep(a, b);
  expect([a.yieldsToPeers, b.yieldsToPeers]).toEqual([true, false]);
  await sweep(a, b);
  expect([a.yieldsToPeers, b.yieldsToPeers]).toEqual([false, false]);
});

test('a replica that yields to a peer that dies serves again: nobody left reaches the upstream better', async () => {
  const { a, b, cut, clock } = twoReplicas();
  await Promise.all([a.start(), b.start()]);
  /** Runs both members' loops for `ms` of fake time. */
  const run = async (ms: number) => {
    for (let t = 0; t < ms; t += 100) {
      clock.advance(100);
      for (let i = 0; i < 5; i++) await settle();
    }
  };
  try {
    cut.A = true;
    await run(1000);
    expect([a.yieldsToPeers, b.yieldsToPeers]).toEqual([true, false]);
    // B crashes: once it is dead (deadAfterMs), A is the best replica left and serves.
    await b.halt();
    await run(2000);
    expect(a.yieldsToPeers).toBe(true);
    await run(2000);
    expect(a.yieldsToPeers).toBe(false);
  } finally {
    await a.stop();
  }
});

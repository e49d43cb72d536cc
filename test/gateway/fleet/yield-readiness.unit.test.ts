/**
 * Which replica tells the balancer to route elsewhere and hands its streams away: one that cannot
 * reach the upstream while another alive replica can, once it has been impaired for the grace.
 * When every replica is cut (an upstream slow or down for all), none does, so an upstream outage
 * never empties the balancer and moves no stream. Two fleet members over one memory store, their
 * loops run on a fake clock.
 */
import { loadConfig } from '../../../src/config';
import { Fleet, IMPAIRED_GRACE_MS } from '../../../src/gateway/fleet/fleet';
import type { FleetStreams } from '../../../src/gateway/fleet/fleet';
import { Lifecycle } from '../../../src/gateway/lifecycle';
import { memoryStore } from '../../../src/gateway/store/memory';
import { createLogger } from '../../../src/lib/logger';
import { FakeClock, settle } from '../../helpers/fake-clock';

/** Streams that run one stream and count the hand-overs asked of them. */
const oneStream = () => {
  const s = {
    handOvers: 0,
    ownedIds: ['s-1'],
    selfFenced: false,
    adopt: () => Promise.resolve(false),
    onOwnerMessage: () => Promise.resolve(),
    handOver: () => {
      s.handOvers++;
      return Promise.resolve(0);
    },
    reconcileOwned: () => Promise.resolve(),
  };
  return s satisfies FleetStreams;
};

async function twoReplicas() {
  const clock = new FakeClock(1_000_000);
  const store = memoryStore({ clock });
  const cut = { A: false, B: false };
  const streams = { A: oneStream(), B: oneStream() };
  const member = (id: 'A' | 'B') =>
    new Fleet({
      store,
      replicaId: id,
      cfg: loadConfig({ env: {} }).store.fleet,
      streams: streams[id],
      lifecycle: new Lifecycle(),
      logger: createLogger('silent'),
      clock,
      upstreamImpaired: () => cut[id],
    });
  const a = member('A');
  const b = member('B');
  await Promise.all([a.start(), b.start()]);
  /** Runs both members' loops for `ms` of fake time. */
  const run = async (ms: number) => {
    for (let t = 0; t < ms; t += 100) {
      clock.advance(100);
      for (let i = 0; i < 5; i++) await settle();
    }
  };
  const yielding = () => [a.yieldsToPeers, b.yieldsToPeers];
  const stop = () => Promise.all([a.stop(), b.stop()]);
  return { a, b, cut, streams, run, yielding, stop, store };
}

test('a replica cut from the upstream is marked at once, yields after the grace while another reaches it, and stops once it reaches it again', async () => {
  const f = await twoReplicas();
  try {
    await f.run(1000);
    expect(f.yielding()).toEqual([false, false]);

    f.cut.A = true;
    await f.run(1000);
    // Marked (nobody's target from now on), but still serving its streams within the grace.
    expect((await f.store.membership(3000)).impaired).toEqual(['A']);
    expect(f.yielding()).toEqual([false, false]);
    expect(f.streams.A.handOvers).toBe(0);
    await f.run(IMPAIRED_GRACE_MS);
    expect(f.yielding()).toEqual([true, false]);
    expect(f.streams.A.handOvers).toBeGreaterThan(0);

    f.cut.A = false;
    await f.run(1000);
    expect(f.yielding()).toEqual([false, false]);
    expect(f.streams.B.handOvers).toBe(0);
  } finally {
    await f.stop();
  }
});

test('when every replica is cut within the grace (the upstream slow for all), none yields and no stream moves', async () => {
  const f = await twoReplicas();
  try {
    await f.run(1000);
    f.cut.A = true;
    // B's ticks fail 2 s after A's: inside the grace.
    await f.run(2000);
    f.cut.B = true;
    await f.run(3 * IMPAIRED_GRACE_MS);
    expect(f.yielding()).toEqual([false, false]);
    expect([f.streams.A.handOvers, f.streams.B.handOvers]).toEqual([0, 0]);
  } finally {
    await f.stop();
  }
});

test('a replica that yields to a peer that dies serves again: nobody left reaches the upstream better', async () => {
  const f = await twoReplicas();
  try {
    f.cut.A = true;
    await f.run(IMPAIRED_GRACE_MS + 1000);
    expect(f.yielding()).toEqual([true, false]);
    // B crashes (its loops stop, its heartbeat with them): once it is dead (deadAfterMs), A is the best replica left and serves.
    await f.b.stop();
    await f.run(4000);
    expect(f.a.yieldsToPeers).toBe(false);
  } finally {
    await f.stop();
  }
});

/**
 * What the multi-process fleet suites share: the CLI bundle, a fleet of real processes per file
 * (test/helpers/fleet.ts: redis-server + emulator + replicas A, B, C), and small readers of the
 * shared state (owner of a stream, slots of the test key).
 */
import { startFleet } from '../../helpers/fleet';
import type { Fleet, FleetOptions } from '../../helpers/fleet';
import type { ResultsSocket } from '../../helpers/results-socket';
import { keyHash } from '../../../src/lib/keys';
import { useMainBundle } from '../../helpers/main-bundle';
import { KEY } from '../../helpers/stack';
import { until } from '../../helpers/time';

export { KEY, KEY_B, http, frameBody, reinfer, tail } from '../../helpers/stack';
export { deadline, sleep, until } from '../../helpers/time';

/** A fleet for the enclosing describe block (or file): started before its tests, stopped after. */
export function useFleet(opts: Omit<FleetOptions, 'main'> = {}): () => Fleet {
  const bundle = useMainBundle();
  let fleet: Fleet | undefined;
  beforeAll(async () => {
    fleet = await startFleet({ main: bundle().file, logLevel: process.env.TEST_LOG_LEVEL ?? 'info', ...opts });
  }, 120_000);
  afterAll(async () => {
    await fleet?.stop();
  }, 60_000);
  return () => fleet!;
}

/** The replica that owns `streamId` now (the record's `owner`). */
export async function ownerOf(fleet: Fleet, streamId: string): Promise<string> {
  const rec = await fleet.session(streamId);
  if (!rec) throw new Error(`no stream record for ${streamId}`);
  return String(rec.owner);
}

/** Slots held by the test key across the fleet (the key's slot set in Redis). */
export async function slotsOfKey(fleet: Fleet, key = KEY): Promise<number> {
  return Number(await fleet.redisCall('ZCARD', `lg:slots:{${keyHash(key)}}`));
}

/**
 * Resolves once `s` has `n` results that arrived after `t` (a drain, a failover); a socket that
 * closes first fails it with its close code and reason. Bound it with `deadline`.
 */
export async function resultsAfter(s: ResultsSocket, t: number, n: number): Promise<void> {
  await until(async () => {
    if (s.received.filter((r) => r.atMs > t).length >= n) return true;
    if (!s.isOpen()) {
      const c = await s.closed;
      throw new Error(`the socket for ${s.streamId} closed ${c.code} ${c.reason} instead of receiving results`);
    }
    return false;
  });
}

/**
 * The one start-up path of a stream (src/gateway/legacy/streams/stream-start.ts): a stream adopted
 * from its record holds every kind of timer a created one does (`STREAM_TIMERS`, the one list), before
 * and after its first frame. Two replicas' streams share one store and one FakeClock; the real
 * emulator answers. A timer kind armed only at create would vanish after a failover: this fails then.
 */
import { brandOf } from '../../../src/brand';
import type { Config } from '../../../src/config';
import { startEmulator } from '../../../src/emulator/server';
import type { RunningEmulator } from '../../../src/emulator/server';
import { createLegacySchemas } from '../../../src/gateway/legacy/contract/schema';
import { normalizeCreate } from '../../../src/gateway/legacy/contract/spec';
import { parseLegacy } from '../../../src/gateway/legacy/contract/validate';
import { UpstreamCatalog } from '../../../src/gateway/legacy/streams/catalog';
import { STREAM_TIMERS } from '../../../src/gateway/legacy/streams/live-stream';
import type { LiveStream } from '../../../src/gateway/legacy/streams/live-stream';
import type { StreamRegistry } from '../../../src/gateway/legacy/streams/registry';
import type { LegacyStreams } from '../../../src/gateway/legacy/streams/legacy-streams';
import type { Store } from '../../../src/gateway/store/store';
import { createLogger } from '../../../src/lib/logger';
import { Sealer } from '../../../src/lib/seal';
import { UpstreamClient } from '../../../src/upstream/client';
import { driveUntil, settle } from '../../helpers/fake-clock';
import type { FakeClock } from '../../helpers/fake-clock';
import { fakeClockStreams } from '../../helpers/fake-clock-streams';
import { TEST_PUBLISHER, testConfig } from '../../helpers/config';
import { KEY, frameBody } from '../../helpers/stack';

const POLL_MS = 50;

let emulator: RunningEmulator;
let cfg: Config;

beforeAll(async () => {
  cfg = testConfig({ emulator: { autoPublish: TEST_PUBLISHER } });
  cfg = { ...cfg, legacy: { ...cfg.legacy, firstFramePollMs: POLL_MS } };
  emulator = await startEmulator(cfg, createLogger(cfg.logLevel));
});
afterAll(async () => {
  await emulator.close();
});

interface Pair {
  clock: FakeClock;
  store: Store;
  a: LegacyStreams;
  b: LegacyStreams;
  idle(): boolean;
  close(): Promise<void>;
}

/** Replicas A and B of one fleet: one store, one sealing secret, one fake clock (control messages go nowhere). */
function pair(): Pair {
  const rig = fakeClockStreams(emulator.url, cfg);
  const sealer = new Sealer('s'.repeat(32));
  const replica = (replicaId: string) => rig.streams({ fleet: { replicaId, sealer, tell: () => Promise.resolve() } });
  const a = replica('A');
  const b = replica('B');
  return {
    clock: rig.clock,
    store: rig.store,
    a,
    b,
    idle: rig.idle,
    async close() {
      await a.closeAll();
      await b.closeAll();
      await rig.close();
    },
  };
}

async function create(p: Pair): Promise<string> {
  const parsed = parseLegacy(createLegacySchemas(brandOf(cfg)).createStream, frameBody({ interval_seconds: 0.5 }), 'req');
  const spec = normalizeCreate(parsed, { maxTokensPerSecond: cfg.legacy.maxTokensPerSecond });
  const upstream = new UpstreamClient({ baseUrl: emulator.url, brand: brandOf(cfg), logger: createLogger(cfg.logLevel) });
  const accountId = await new UpstreamCatalog(upstream, { modelsCacheMs: 0, accountCacheMs: 0 }).accountOf(KEY);
  await upstream.close();
  return (await p.a.create({ apiKey: KEY, accountId, spec })).streamId;
}

/** The stream running in `streams` (its registry is private: the timers are the stream's own state). */
function running(streams: LegacyStreams, id: string): LiveStream {
  const stream = (streams as unknown as { registry: StreamRegistry }).registry.get(id);
  if (!stream) throw new Error(`stream ${id} is not running here`);
  return stream;
}

const kinds = (stream: LiveStream) => [...stream.timerKinds].sort();
const ALL = [...STREAM_TIMERS].sort();

/** A's stream moves to B (claimed under A's epoch, then adopted from its record), as after A's failure. */
async function moveToB(p: Pair, id: string): Promise<LiveStream> {
  expect(await p.a.moves.handOver(() => 'B')).toBe(1);
  const rec = await p.store.getRecord(id);
  expect(rec?.owner).toBe('B');
  expect(await p.b.moves.adopt(rec!, 'failover')).toBe(true);
  return running(p.b, id);
}

describe('a stream starts one way, created or adopted', () => {
  test('created, and adopted before its first frame: every timer kind is armed', async () => {
    const p = pair();
    try {
      const id = await create(p);
      const created = running(p.a, id);
      expect(kinds(created)).toEqual(ALL);
      expect(created.phase).toBe('live');
      expect((await p.store.getRecord(id))?.gridStartMs).toBeNull();
      const adopted = await moveToB(p, id);
      expect(kinds(adopted)).toEqual(ALL);
      expect(adopted.phase).toBe('live');
      expect(created.phase).toBe('stopping');
    } finally {
      await p.close();
    }
  });

  test('adopted after its first frame (ticking resumes on its grid): every timer kind is armed', async () => {
    const p = pair();
    try {
      const id = await create(p);
      const created = running(p.a, id);
      await driveUntil(p.clock, () => created.record.gridStartMs !== null, { stepMs: POLL_MS, maxSteps: 400, idle: p.idle });
      expect(kinds(created)).toEqual(ALL);
      // The grid goes into the store on its own write: B resumes on it only once it is there.
      for (let i = 0; i < 100 && (await p.store.getRecord(id))?.gridStartMs == null; i++) await settle();
      expect((await p.store.getRecord(id))?.gridStartMs).toBe(created.record.gridStartMs);
      const adopted = await moveToB(p, id);
      expect(adopted.record.gridStartMs).toBe(created.record.gridStartMs);
      expect(kinds(adopted)).toEqual(ALL);
    } finally {
      await p.close();
    }
  });

  test('a stopped stream holds no timer', async () => {
    const p = pair();
    try {
      const id = await create(p);
      const stream = running(p.a, id);
      await p.a.end(id, 'client_requested');
      expect(stream.phase).toBe('stopping');
      expect(stream.timerKinds).toEqual([]);
    } finally {
      await p.close();
    }
  });
});

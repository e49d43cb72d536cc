/**
 * A fleet in one process: two or three real gateways (loopback, port 0) sharing ONE memory store
 * (the cross-replica and fencing groups also on a real redis-server, one connection per replica)
 * and one FakeClock, in front of one real emulator. The fleet's loops (heartbeat, sweep, failover,
 * reconcile), leases and ticks run on the fake clock, which moves only while no upstream call is
 * running (an answer takes no fake time, however slow a loaded machine makes it); outcomes are read
 * from events (results on sockets, closes, store state), never from elapsed time. Upstream deletes
 * are counted by a plain forwarding server in front of the emulator.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Writable } from 'node:stream';
import type { Config } from '../../../src/config';
import { startEmulator } from '../../../src/emulator/server';
import type { RunningEmulator } from '../../../src/emulator/server';
import type { MediaRelay } from '../../../src/gateway/legacy/streams/ports';
import { startGateway } from '../../../src/gateway/server';
import type { RunningGateway } from '../../../src/gateway/server';
import { memoryStore } from '../../../src/gateway/store/memory';
import { connectRedisStore } from '../../../src/gateway/store/redis';
import type { StreamRecord, Store } from '../../../src/gateway/store/store';
import { keyHash } from '../../../src/lib/keys';
import { createLogger } from '../../../src/lib/logger';
import { tickNumbers as ticksOfIds } from '../../helpers/fleet';
import { FakeClock, callsInFlight, driveUntil as driveClock, quiesce, settle } from '../../helpers/fake-clock';
import { KEY, KEY_B, frameBody, http as call } from '../../helpers/stack';
import { openResults } from '../../helpers/results-socket';
import type { ResultsSocket } from '../../helpers/results-socket';
import { FAST_RETRY, TEST_PUBLISHER, testConfig } from '../../helpers/config';
import { logLines } from '../../helpers/log-lines';
import { startRedis } from '../../helpers/redis';
import type { RedisServer } from '../../helpers/redis';
import { deadline, sleep, until as poll } from '../../helpers/time';
import { slotsInUse } from '../../helpers/store-ops';
import type { Lifecycle } from '../../../src/gateway/lifecycle';

const SECRET = 'fleet-test-secret-0123456789abcdef';
const INTERVAL_MS = 1000;

let emulator: RunningEmulator;
let redis: RedisServer;
let proxy: http.Server;
let upstreamUrl: string;
/** DELETE /v1beta/streams/:id calls that reached the upstream, per stream id. */
const deletes = new Map<string, number>();

beforeAll(async () => {
  const cfg = testConfig({ emulator: { autoPublish: TEST_PUBLISHER } });
  emulator = await startEmulator(cfg, createLogger(cfg.logLevel));
  // DEBUG SLEEP stands for a Redis outage (the server stops answering, as when paused).
  redis = await startRedis(['--enable-debug-command', 'yes']);
  const target = new URL(emulator.url);
  proxy = http.createServer((req, res) => {
    const m = /^\/v1beta\/streams\/([^/?]+)$/.exec(req.url ?? '');
    if (req.method === 'DELETE' && m) deletes.set(m[1]!, (deletes.get(m[1]!) ?? 0) + 1);
    const up = http.request({ host: target.hostname, port: target.port, path: req.url, method: req.method, headers: req.headers }, (r) => {
      res.writeHead(r.statusCode ?? 502, r.headers);
      r.pipe(res);
    });
    up.on('error', () => res.destroy());
    req.pipe(up);
  });
  await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
  upstreamUrl = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
});
afterAll(async () => {
  proxy.closeAllConnections();
  await new Promise((r) => proxy.close(r));
  await emulator.close();
  await redis.stop();
});

interface Replica {
  id: string;
  gw: RunningGateway;
  url: string;
}

type StoreKind = 'memory' | 'redis';

interface Fleet {
  clock: FakeClock;
  /** The test's own handle on the fleet's store. */
  store: Store;
  replicas: Replica[];
  /** `replica:reason` of every stream end, wherever it was counted. */
  ended: string[];
  fenced: string[];
  adopted: string[];
  /** No replica has an upstream call running. */
  idle(): boolean;
  close(): Promise<void>;
}

interface FleetOptions {
  legacy?: Record<string, unknown>;
  /** Redis command timeout (an outage shows sooner). */
  commandTimeoutMs?: number;
  /** Where the replicas log (warn and up); default nowhere. */
  log?: Writable;
  /** Media relay of each replica (room sources); default the gateway's own. */
  media?: (replicaId: string) => MediaRelay;
  /** Wraps a replica's view of the store (a heartbeat that fails for one replica only). */
  wrap?: (replicaId: string, store: Store) => Store;
  /** Fleet timing (`store.fleet`) over the defaults. */
  fleet?: Record<string, number>;
}

let fleets = 0;

async function startFleet(ids: string[], kind: StoreKind = 'memory', o: FleetOptions = {}): Promise<Fleet> {
  const clock = new FakeClock(Date.now());
  const memory = kind === 'memory' ? memoryStore({ clock }) : undefined;
  const connections: Store[] = [];
  // Redis: a connection per replica, as separate processes would have (its clock is Redis TIME); a
  // keyspace per fleet, so no test sees another's streams or slots.
  const prefix = `fleet-${++fleets}:`;
  const connect = async (): Promise<Store> =>
    memory ?? connections[connections.push(await connectRedisStore(redis.url, { prefix, commandTimeoutMs: o.commandTimeoutMs })) - 1]!;
  const store = await connect();
  const ended: string[] = [];
  const fenced: string[] = [];
  const adopted: string[] = [];
  const replicas: Replica[] = [];
  const running: (() => number)[] = [];
  for (const id of ids) {
    const cfg: Config = testConfig({ legacy: o.legacy ?? {}, store: { gatewayId: id, secret: SECRET, fleet: o.fleet ?? {} } });
    const logger = o.log ? createLogger('warn', 'gateway', o.log) : createLogger(cfg.logLevel);
    const gw = await startGateway(cfg, logger, upstreamUrl, {
      store: o.wrap ? o.wrap(id, await connect()) : await connect(),
      media: o.media?.(id),
      clock,
      retry: FAST_RETRY,
      observer: {
        streamEnded: (_k, reason) => void ended.push(`${id}:${reason}`),
        tickFenced: (reason) => void fenced.push(`${id}:${reason}`),
        streamAdopted: (streamId, how) => void adopted.push(`${id}:${how}:${streamId}`),
      },
    });
    running.push(callsInFlight(gw.gateway.upstream));
    replicas.push({ id, gw, url: gw.url });
  }
  return {
    clock,
    store,
    replicas,
    ended,
    fenced,
    adopted,
    idle: () => running.every((n) => n() === 0),
    async close() {
      for (const r of replicas) await r.gw.close(2000);
      await memory?.close();
      for (const c of connections) await c.close();
    },
  };
}

/**
 * Moves fake time in 50 ms steps, each once no upstream call is running, letting real I/O (emulator
 * answers, sockets) run in between, until `done` holds. Fails instead of hanging.
 */
const driveUntil = (f: Fleet, done: () => boolean) => driveClock(f.clock, done, { idle: f.idle });

/** Moves fake time `steps` × 50 ms as `driveUntil` does (to show that nothing more happens). */
async function drive(f: Fleet, steps: number): Promise<void> {
  for (let i = 0; i < steps; i++) {
    await quiesce(f.idle);
    f.clock.advance(50);
    await settle();
    await sleep(4);
  }
}

/** Waits in real time (no fake time passes) until `done` holds; the bound turns a hang into a failure. */
const until = (done: () => boolean | Promise<boolean>) => deadline(poll(done, 5), 10_000, 'the awaited state');

async function create(r: Replica, key = KEY, prompt = 'Describe the frame'): Promise<string> {
  const res = await call(r.url, 'POST', '/v0.2/streams', { key, body: frameBody({ interval_seconds: INTERVAL_MS / 1000 }, { prompt }) });
  expect(res.status).toBe(201);
  return (res.body as { stream_id: string }).stream_id;
}

/**
 * A replica's crash as its fleet sees it: its loops and control channel stop, it takes no create,
 * and every stream stops here as on an `ended` message (media stopped, nothing deleted upstream),
 * with no word to the store: the records still name it, and survivors claim them once it is dead.
 */
async function halt(r: Replica): Promise<void> {
  const { fleet, streams, lifecycle } = r.gw.gateway;
  await fleet.stop();
  // Past where it takes or starts streams, as a dead process is (the gateway moves its lifecycle alone).
  (lifecycle as Lifecycle).advance('leaving');
  await Promise.all(streams.moves.ownedIds.map((streamId) => streams.moves.onOwnerMessage({ op: 'ended', streamId, reason: 'crashed' })));
}

/** Tick numbers of the results a socket got (the result id is derived from stream id + tick). */
const tickNumbers = (sock: ResultsSocket, streamId: string) =>
  ticksOfIds(
    sock.messages.map((m) => String(m.id)),
    streamId,
  );

describe.each(['memory', 'redis'] as const)('any replica, any call (%s store)', (kind) => {
  let f: Fleet;
  beforeEach(async () => {
    f = await startFleet(['A', 'B'], kind);
  });
  afterEach(async () => {
    await f.close();
  });

  test('DELETE via B: sockets on A and B close 1001 client_requested (after the answer; a client closing its own first sees no server close), upstream deleted once, slot released once, A stops', async () => {
    const [a, b] = f.replicas as [Replica, Replica];
    const id = await create(a);
    const onA = await openResults(a.url, id, KEY);
    const onB = await openResults(b.url, id, KEY);
    // Browser SDK 2.x's stop(): DELETE (here through B), await the answer, then close its own socket (on A).
    const sdk = await openResults(a.url, id, KEY);
    await driveUntil(f, () => onA.messages.length >= 1 && onB.messages.length >= 1);
    expect(a.gw.gateway.streams.activeCount).toBe(1);
    expect(b.gw.gateway.streams.activeCount).toBe(0);

    const del = await call(b.url, 'DELETE', `/v0.2/streams/${id}`);
    expect(del).toMatchObject({ status: 200, body: { status: 'ok' } });
    expect(sdk.ws.readyState).toBe(sdk.ws.OPEN);
    sdk.ws.close(1000, 'stopped');
    expect(await sdk.closed).toEqual({ code: 1000, reason: 'stopped' });
    expect(await onA.closed).toEqual({ code: 1001, reason: 'client_requested' });
    expect(await onB.closed).toEqual({ code: 1001, reason: 'client_requested' });
    await until(() => a.gw.gateway.streams.activeCount === 0);
    expect(deletes.get(id)).toBe(1);
    expect(f.ended).toEqual(['B:client_requested']);
    expect(await slotsInUse(f.store, keyHash(KEY))).toBe(0);
    expect((await call(emulator.url, 'GET', `/v1beta/streams/${id}`)).body).toMatchObject({ state: 'ended' });
    // Again, on either replica: already ended (204), nothing deleted twice.
    expect((await call(a.url, 'DELETE', `/v0.2/streams/${id}`)).status).toBe(204);
    expect((await call(b.url, 'DELETE', `/v0.2/streams/${id}`)).status).toBe(204);
    expect(deletes.get(id)).toBe(1);
    expect(a.gw.gateway.streams.undeletedUpstreamStreams).toEqual([]);
  });

  test('keepalive on B reports the exact cost and seconds since the keepalive served by A', async () => {
    const [a, b] = f.replicas as [Replica, Replica];
    const id = await create(a);
    const sock = await openResults(b.url, id, KEY);
    await driveUntil(f, () => sock.messages.length >= 1);
    expect((await call(a.url, 'POST', `/v0.2/streams/${id}/keepalive`)).status).toBe(200);
    const n = sock.messages.length;
    await driveUntil(f, () => sock.messages.length >= n + 3);
    // No fake time passes from here: the store's counter is what B must report.
    const rec = (await f.store.getRecord(id))!;
    expect(rec.costMicrocents).toBeGreaterThan(0);
    const secs = Math.round((f.clock.now() - rec.lastKeepaliveAtMs) / 1000);
    const ka = await call(b.url, 'POST', `/v0.2/streams/${id}/keepalive`);
    expect(ka.status).toBe(200);
    expect(ka.body).toMatchObject({ cost_cents: rec.costMicrocents / 1_000_000, seconds_charged: secs });
    expect(secs).toBeGreaterThanOrEqual(3);
    expect((await f.store.getRecord(id))!.costMicrocents).toBe(0);
    // Served by B, counted once: A's next keepalive sees only what came after.
    const again = await call(a.url, 'POST', `/v0.2/streams/${id}/keepalive`);
    expect(again.body).toMatchObject({ cost_cents: 0, seconds_charged: 0 });
  });

  test('prompt PATCH via B is used by the owner A from its next tick; feedback, info, and another account’s 404 via B', async () => {
    const [a, b] = f.replicas as [Replica, Replica];
    const id = await create(a);
    const sock = await openResults(b.url, id, KEY);
    await driveUntil(f, () => sock.messages.length >= 1);
    const patch = await call(b.url, 'PATCH', `/v0.2/streams/${id}/config/prompt`, { body: { prompt: 'Count the cats' } });
    expect(patch).toMatchObject({ status: 200, body: { prompt: 'Count the cats' } });
    const n = sock.messages.length;
    await driveUntil(f, () => sock.messages.length >= n + 1);
    // The control message reached A before its next tick: every later result carries the new prompt.
    expect(sock.messages.slice(n).every((m) => m.prompt === 'Count the cats')).toBe(true);
    expect(
      (await call(b.url, 'POST', `/v0.2/streams/${id}/feedback`, { body: { rating: 4, category: 'quality', feedback: 'ok' } })).status,
    ).toBe(200);
    expect((await call(a.url, 'GET', '/v0.2/streams/feedback')).body).toEqual([expect.objectContaining({ stream_id: id, rating: 4 })]);
    for (const [method, path, body] of [
      ['POST', `/v0.2/streams/${id}/keepalive`, undefined],
      ['DELETE', `/v0.2/streams/${id}`, undefined],
      ['PATCH', `/v0.2/streams/${id}/config/prompt`, { prompt: 'x' }],
      ['GET', `/v0.2/streams/${id}/info`, undefined],
    ] as const) {
      expect(await call(b.url, method, path, { key: KEY_B, body })).toMatchObject({ status: 404, body: { error: 'stream_not_found' } });
    }
    const foreign = await openResults(b.url, id, KEY_B);
    expect(await foreign.closed).toEqual({ code: 1008, reason: 'stream_not_found' });
    // Info on the replica that does not own the stream: the owner's inference figures, from the store.
    const info = await call(b.url, 'GET', `/v0.2/streams/${id}/info`);
    expect(info).toMatchObject({ status: 200, body: { stream_id: id, source_type: 'native' } });
    expect((info.body as { inferences_completed: number }).inferences_completed).toBeGreaterThan(0);
    expect(a.gw.gateway.streams.activeCount).toBe(1);
  });

  test('a lost prompt message is caught by the tick commit (promptRev)', async () => {
    const [a] = f.replicas as [Replica, Replica];
    const id = await create(a);
    const sock = await openResults(a.url, id, KEY);
    await driveUntil(f, () => sock.messages.length >= 1);
    // Changed in the store with no message to A (as if the control message were lost).
    await f.store.setPrompt(id, 'Silent change', f.clock.now());
    const n = sock.messages.length;
    await driveUntil(f, () => sock.messages.some((m, i) => i >= n && m.prompt === 'Silent change'));
    // One tick at most still carried the old prompt (the one whose commit revealed the new revision).
    expect(sock.messages.slice(n).filter((m) => m.prompt !== 'Silent change').length).toBeLessThanOrEqual(1);
  });
});

describe.each(['memory', 'redis'] as const)('fencing (%s store)', (kind) => {
  let f: Fleet;
  beforeEach(async () => {
    f = await startFleet(['A'], kind);
  });
  afterEach(async () => {
    await f.close();
  });

  test('a fenced tick is never published: a claim by another owner stops A without a result', async () => {
    const [a] = f.replicas as [Replica];
    const id = await create(a);
    const sock = await openResults(a.url, id, KEY);
    await driveUntil(f, () => sock.messages.length >= 1);
    const rec = (await f.store.getRecord(id))!;
    expect(rec).toMatchObject({ owner: 'A', epoch: 1, pinned: false, fallbackModels: expect.any(Array) });
    expect(rec.sealedKey).not.toContain(KEY);
    expect(rec.gridStartMs).toEqual(expect.any(Number));
    await f.store.claimStream(id, { owner: 'A', epoch: 1 }, 'ghost');
    const n = sock.messages.length;
    await driveUntil(f, () => a.gw.gateway.streams.activeCount === 0);
    expect(f.fenced).toEqual(['A:fenced']);
    await drive(f, 40);
    expect(sock.messages.length).toBe(n);
    // Nothing was ended by A: the record is still active, owned by the claimer.
    expect(await f.store.getRecord(id)).toMatchObject({ state: 'active', owner: 'ghost', epoch: 2 });
    expect(f.ended).toEqual([]);
  });

  /** A stream of `a` with a result, then its record and slot gone (as in a store restarted empty). */
  async function lostRecord(a: Replica): Promise<{ id: string; sock: ResultsSocket }> {
    const id = await create(a);
    const sock = await openResults(a.url, id, KEY);
    await driveUntil(f, () => sock.messages.length >= 1);
    await f.store.expireRecord(id, 0);
    await until(async () => (await f.store.getRecord(id)) === undefined);
    await f.store.releaseSlot(keyHash(KEY), (await slotsOf(id))[0]!.slotId);
    return { id, sock };
  }
  /** The key's slots bound to stream `id` (on Redis, earlier tests' streams hold the key's other slots). */
  const slotsOf = async (id: string) => (await f.store.slotHolders(keyHash(KEY))).filter((h) => h.streamId === id);

  test('a record the store lost is re-registered by its owner under a new epoch; ticking goes on', async () => {
    const { id, sock } = await lostRecord(f.replicas[0]!);
    const n = sock.messages.length;
    await driveUntil(f, () => sock.messages.length >= n + 2);
    expect(f.fenced).toContain('A:missing');
    expect(await f.store.getRecord(id)).toMatchObject({ state: 'active', owner: 'A', epoch: 2 });
    expect(await slotsOf(id)).toHaveLength(1);
  });

  /** A fleet of A whose write-back of a lost record finds `first` written just before (the race of two holders). */
  async function lostRecordRace(first: (rec: StreamRecord) => StreamRecord): Promise<{ a: Replica; id: string; sock: ResultsSocket }> {
    await f.close();
    const racing = (_replica: string, store: Store): Store =>
      new Proxy(store, {
        get(target, prop, receiver) {
          if (prop === 'restoreRecord') {
            return async (rec: StreamRecord) => {
              await target.restoreRecord(first(rec));
              return target.restoreRecord(rec);
            };
          }
          const v = Reflect.get(target, prop, receiver) as unknown;
          return typeof v === 'function' ? (v as (...args: unknown[]) => unknown).bind(target) : v;
        },
      });
    f = await startFleet(['A'], kind, { wrap: racing });
    const a = f.replicas[0]!;
    return { a, ...(await lostRecord(a)) };
  }

  test('a lost record another holder wrote back first is left to it: no overwrite, no tick, slot or end from A', async () => {
    // Another replica that also held the stream (a stale copy, or its owner) wrote it back first.
    const { a, id, sock } = await lostRecordRace((rec) => ({ ...rec, owner: 'ghost', epoch: 7 }));
    await driveUntil(f, () => a.gw.gateway.streams.activeCount === 0);
    const n = sock.messages.length;
    await drive(f, 40);
    expect(sock.messages.length).toBe(n);
    expect(await f.store.getRecord(id)).toMatchObject({ state: 'active', owner: 'ghost', epoch: 7 });
    expect(await slotsOf(id)).toHaveLength(0);
    expect(f.ended).toEqual([]);
    expect(deletes.get(id) ?? 0).toBe(0);
  });

  test('a lost record A itself wrote back already (a caller that read the store before) stays A’s: ticking goes on at its epoch, no leave-and-adopt', async () => {
    const { a, id, sock } = await lostRecordRace((rec) => ({ ...rec, epoch: rec.epoch + 5 }));
    const n = sock.messages.length;
    await driveUntil(f, () => sock.messages.length >= n + 2);
    expect(a.gw.gateway.streams.activeCount).toBe(1);
    // Its ticks commit at the stored epoch (a fenced one would have stopped it).
    expect(await f.store.getRecord(id)).toMatchObject({ state: 'active', owner: 'A', epoch: 7 });
    expect(f.fenced.filter((r) => r !== 'A:missing')).toEqual([]);
    // Kept, not left and adopted back by the owned-streams reconcile (a missed tick on the way).
    expect(f.adopted).toEqual([]);
  });
});

test('a Redis outage never ends a stream as lease_expired: the lease check retries and extends a lease that lapsed meanwhile', async () => {
  const log = logLines();
  const f = await startFleet(['A'], 'redis', { legacy: { leaseTtlSeconds: 3 }, commandTimeoutMs: 300, log: log.sink });
  try {
    const [a] = f.replicas as [Replica];
    const id = await create(a);
    const sock = await openResults(a.url, id, KEY);
    await driveUntil(f, () => sock.messages.length >= 1);
    const outage = redis.command('DEBUG', 'SLEEP', '2').catch(() => undefined);
    await until(() =>
      f.store.getRecord(id).then(
        () => false,
        () => true,
      ),
    );
    // The lease (3 s) lapses on the fake clock while Redis cannot be read.
    await drive(f, 80);
    await outage;
    await until(() =>
      f.store.getRecord(id).then(
        () => true,
        () => false,
      ),
    );
    // Back: the lease lapsed during the outage, and the retried check extends it instead of ending the stream.
    let rec = (await f.store.getRecord(id))!;
    expect(rec.leaseExpiresAtMs).toBeLessThan(f.clock.now());
    for (let i = 0; i < 100 && rec.leaseExpiresAtMs <= f.clock.now(); i++) {
      await drive(f, 1);
      rec = (await f.store.getRecord(id))!;
    }
    expect(rec).toMatchObject({ state: 'active' });
    expect(rec.leaseExpiresAtMs).toBeGreaterThan(f.clock.now());
    expect(f.ended).toEqual([]);
    expect(log.lines.some((l) => l.includes('lease check could not read the store'))).toBe(true);
    // The client's keepalives take over again, and results go on.
    expect((await call(a.url, 'POST', `/v0.2/streams/${id}/keepalive`)).status).toBe(200);
    const n = sock.messages.length;
    await driveUntil(f, () => sock.messages.length >= n + 1);
    expect(f.ended).toEqual([]);
  } finally {
    await f.close();
  }
});

test('keepalives served by another replica reach the owner through its tick commits: its lease checks read nothing, and once they stop the stream ends lease_expired', async () => {
  const reads = new Map<string, number>();
  const counting = (replica: string, store: Store): Store =>
    new Proxy(store, {
      get(target, prop, receiver) {
        if (prop === 'getRecord') {
          return (id: string) => {
            reads.set(replica, (reads.get(replica) ?? 0) + 1);
            return target.getRecord(id);
          };
        }
        const v = Reflect.get(target, prop, receiver) as unknown;
        return typeof v === 'function' ? (v as (...args: unknown[]) => unknown).bind(target) : v;
      },
    });
  // The fleet-wide slot reconciler (it reads records too) stays out of the count.
  const f = await startFleet(['A', 'B'], 'memory', { legacy: { leaseTtlSeconds: 4 }, wrap: counting, fleet: { reconcileMs: 3_600_000 } });
  try {
    const [a, b] = f.replicas as [Replica, Replica];
    const id = await create(a);
    const sock = await openResults(a.url, id, KEY);
    await driveUntil(f, () => sock.messages.length >= 1);
    const readsBefore = reads.get('A') ?? 0;
    // Three leases' worth of fake time, a keepalive through B every 2 s.
    for (let i = 0; i < 6; i++) {
      expect((await call(b.url, 'POST', `/v0.2/streams/${id}/keepalive`)).status).toBe(200);
      await drive(f, 40);
    }
    expect(f.ended).toEqual([]);
    expect(reads.get('A') ?? 0).toBe(readsBefore);
    // No keepalive any more: the lease lapses, and A's check reads the store and ends the stream.
    await driveUntil(f, () => f.ended.length > 0);
    expect(f.ended).toEqual(['A:lease_expired']);
    expect(reads.get('A')).toBeGreaterThan(readsBefore);
  } finally {
    await f.close();
  }
});

/** Drain of A with B and C alive: streams handed over with at most one missed tick, none ends. */
async function drainHandsOver(f: Fleet): Promise<void> {
  const [a, b] = f.replicas as [Replica, Replica, Replica];
  const ids = [await create(a), await create(a)];
  const socks = await Promise.all(ids.map((id) => openResults(b.url, id, KEY)));
  const onA = await openResults(a.url, ids[0]!, KEY);
  await driveUntil(f, () => socks.every((s) => s.messages.length >= 2));
  const before = socks.map((s) => s.messages.length);
  await a.gw.close(2000);
  // Not an end (1001): clients reconnect on 1012 and land on a replica that serves the stream.
  expect(await onA.closed).toEqual({ code: 1012, reason: 'service_restart' });
  expect(f.adopted.filter((x) => x.includes(':handover:')).length).toBe(2);
  await driveUntil(f, () => socks.every((s, i) => s.messages.length >= before[i]! + 3));
  expect(f.ended).toEqual([]);
  for (const [i, id] of ids.entries()) {
    const ticks = tickNumbers(socks[i]!, id);
    expect(new Set(ticks).size).toBe(ticks.length);
    const gaps = ticks.slice(1).map((n, j) => n - ticks[j]! - 1);
    expect(Math.max(...gaps)).toBeLessThanOrEqual(1);
  }
  expect((await f.store.membership(3000)).alive.sort()).toEqual(['B', 'C']);
  expect(await slotsInUse(f.store, keyHash(KEY))).toBe(2);
  expect(a.gw.gateway.streams.undeletedUpstreamStreams).toEqual([]);
}

test('drain on a real redis-server: the same handover, with at most one missed tick', async () => {
  const f = await startFleet(['A', 'B', 'C'], 'redis');
  try {
    await drainHandsOver(f);
  } finally {
    await f.close();
  }
});

describe('failover and drain', () => {
  let f: Fleet;
  beforeEach(async () => {
    f = await startFleet(['A', 'B', 'C']);
  });
  afterEach(async () => {
    await f.close();
  });

  test('A halts: its streams continue on survivors on the same grid with the updated prompt, no duplicate result, no slot leak', async () => {
    const [a, b, c] = f.replicas as [Replica, Replica, Replica];
    const ids = [await create(a), await create(a), await create(a)];
    const socks = await Promise.all(ids.map((id) => openResults(b.url, id, KEY)));
    // A fourth stream stands for a webrtc one: its relay dies with A, so it cannot fail over.
    const pinned = await create(a);
    await f.store.updateRecord(pinned, { pinned: true });
    const pinnedSock = await openResults(c.url, pinned, KEY);
    await driveUntil(f, () => socks.every((s) => s.messages.length >= 2));
    await call(c.url, 'PATCH', `/v0.2/streams/${ids[0]}/config/prompt`, { body: { prompt: 'After the crash' } });
    await driveUntil(f, () => socks[0]!.messages.some((m) => m.prompt === 'After the crash'));
    const before = socks.map((s) => s.messages.length);

    await halt(a);
    await driveUntil(f, () => socks.every((s, i) => s.messages.length >= before[i]! + 3));
    expect(await pinnedSock.closed).toEqual({ code: 1001, reason: 'webrtc_disconnected' });
    expect(deletes.get(pinned)).toBe(1);
    expect(f.adopted.filter((x) => x.includes(':failover:')).length).toBe(3);
    expect(f.adopted.every((x) => !x.startsWith('A:'))).toBe(true);
    // What the operator sees on the survivors' /metrics: the adoptions, and two replicas left.
    const texts = await Promise.all([b, c].map((r) => r.gw.gateway.metrics.text()));
    const sample = (text: string, series: string) =>
      Number(
        text
          .split('\n')
          .find((l) => l.startsWith(`${series} `))
          ?.slice(series.length + 1),
      );
    expect(texts.reduce((sum, t) => sum + sample(t, 'gateway_fleet_adoptions_total{how="failover"}'), 0)).toBe(3);
    for (const t of texts) expect(sample(t, 'gateway_fleet_replicas')).toBe(2);
    expect(b.gw.gateway.streams.activeCount + c.gw.gateway.streams.activeCount).toBe(3);
    for (const [i, id] of ids.entries()) {
      const ticks = tickNumbers(socks[i]!, id);
      expect(ticks.every((n) => n >= 0)).toBe(true);
      // Zero duplicates, in order: the grid and numbering went on where A stopped.
      expect(new Set(ticks).size).toBe(ticks.length);
      expect([...ticks].sort((x, y) => x - y)).toEqual(ticks);
      const rec = (await f.store.getRecord(id))!;
      expect(rec.owner === 'B' || rec.owner === 'C').toBe(true);
      expect(rec.epoch).toBe(2);
    }
    expect(socks[0]!.messages.at(-1)).toMatchObject({ prompt: 'After the crash' });
    expect(await slotsInUse(f.store, keyHash(KEY))).toBe(3);
    // A owns nothing any more: forgotten by the membership.
    await drive(f, 20);
    expect((await f.store.membership(3000)).dead).not.toContain('A');
    for (const id of ids) expect((await call(c.url, 'DELETE', `/v0.2/streams/${id}`)).status).toBe(200);
    expect(await slotsInUse(f.store, keyHash(KEY))).toBe(0);
    for (const id of ids) expect(deletes.get(id)).toBe(1);
  });

  test("a room-source stream is re-joined by its new owner (the relay died with A): same customer room, B's fresh publish token", async () => {
    await f.close();
    const joins: { replica: string; streamId: string; room: unknown; publishUrl: string; publishToken: string }[] = [];
    const stops: string[] = [];
    // A relay that only records what it was asked: the real one needs a customer room (test/gateway/ingest).
    const relay = (replica: string): MediaRelay => ({
      start: async (input) => {
        joins.push({
          replica,
          streamId: input.streamId,
          room: input.spec.source,
          publishUrl: input.publishUrl,
          publishToken: input.publishToken,
        });
        return { transport: 'room' };
      },
      stop: (streamId) => void stops.push(`${replica}:${streamId}`),
    });
    f = await startFleet(['A', 'B'], 'memory', { media: relay });
    const [a, b] = f.replicas as [Replica, Replica];
    const room = { type: 'room', url: 'wss://customer.example/room', token: 'customer-room-token' };
    const res = await call(a.url, 'POST', '/v0.2/streams', {
      body: { ...frameBody({ interval_seconds: INTERVAL_MS / 1000 }), source: room },
    });
    expect(res.status).toBe(201);
    const id = (res.body as { stream_id: string }).stream_id;
    const sock = await openResults(b.url, id, KEY);
    await driveUntil(f, () => sock.messages.length >= 1);
    await halt(a);
    expect(stops).toEqual([`A:${id}`]);
    const n = sock.messages.length;
    await driveUntil(f, () => sock.messages.length >= n + 2);
    expect(joins.map((j) => j.replica)).toEqual(['A', 'B']);
    expect(joins[1]).toMatchObject({
      streamId: id,
      room: expect.objectContaining({ url: room.url, token: room.token }),
      publishUrl: joins[0]!.publishUrl,
    });
    expect(joins[1]!.publishToken).toEqual(expect.any(String));
    expect(joins[1]!.publishToken.length).toBeGreaterThan(0);
    expect(b.gw.gateway.streams.activeCount).toBe(1);
  });

  test('drain of A hands its streams to the others with at most one missed tick; none ends', () => drainHandsOver(f));

  test('a lost adopt message: the new owner finds the stream in its owned-streams reconcile; the old one is fenced', async () => {
    const [a, b] = f.replicas as [Replica, Replica, Replica];
    const id = await create(a);
    const sock = await openResults(b.url, id, KEY);
    await driveUntil(f, () => sock.messages.length >= 1);
    // Claimed for B in the store, and no message sent.
    expect(await f.store.claimStream(id, { owner: 'A', epoch: 1 }, 'B')).toMatchObject({ owner: 'B', epoch: 2 });
    const n = sock.messages.length;
    await driveUntil(f, () => b.gw.gateway.streams.activeCount === 1 && sock.messages.length >= n + 2);
    expect(a.gw.gateway.streams.activeCount).toBe(0);
    expect(f.fenced).toEqual(['A:fenced']);
    expect(f.adopted).toEqual([`B:handover:${id}`]);
    const ticks = tickNumbers(sock, id);
    expect(new Set(ticks).size).toBe(ticks.length);
  });

  test('a replica whose heartbeat fails stops ticking before the fleet takes its streams: zero duplicates, and once back it finds the streams gone (fenced) and stops them', async () => {
    await f.close();
    const down = new Set<string>();
    // Only A's heartbeats fail (its link to the store is cut for heartbeats; everything else answers).
    const flaky = (replica: string, store: Store): Store =>
      new Proxy(store, {
        get(target, prop, receiver) {
          if (prop === 'heartbeat' && down.has(replica)) return async () => Promise.reject(new Error('store unreachable'));
          const v = Reflect.get(target, prop, receiver) as unknown;
          return typeof v === 'function' ? (v as (...args: unknown[]) => unknown).bind(target) : v;
        },
      });
    f = await startFleet(['A', 'B'], 'memory', { wrap: flaky });
    const [a, b] = f.replicas as [Replica, Replica];
    const id = await create(a);
    const sock = await openResults(b.url, id, KEY);
    await driveUntil(f, () => sock.messages.length >= 2);
    down.add('A');
    await driveUntil(f, () => b.gw.gateway.streams.activeCount === 1);
    // A paused its ticks (self-fenced) before B took over: nothing from A after the fence.
    expect(a.gw.gateway.streams.moves.selfFenced).toBe(true);
    down.delete('A');
    const n = sock.messages.length;
    await driveUntil(f, () => sock.messages.length >= n + 3 && a.gw.gateway.streams.activeCount === 0);
    expect(a.gw.gateway.streams.moves.selfFenced).toBe(false);
    const ticks = tickNumbers(sock, id);
    expect(new Set(ticks).size).toBe(ticks.length);
    expect([...ticks].sort((x, y) => x - y)).toEqual(ticks);
    expect(f.adopted).toEqual([`B:failover:${id}`]);
    expect(await f.store.getRecord(id)).toMatchObject({ owner: 'B', epoch: 2 });
  });

  test("the fleet's slot reconciler frees a crashed create's unbound slot after its 30 s grace, within one reconcile period", async () => {
    const kh = keyHash(KEY);
    // A create in flight on a replica that then vanished: acquired, never bound.
    expect(await f.store.acquireSlot(kh, 'orphan', 5, 'vanished')).toBe(true);
    const acquiredAt = f.clock.now();
    for (let i = 0; i < 600 && (await slotsInUse(f.store, kh)) > 0; i++) {
      f.clock.advance(100);
      await settle();
    }
    const freedAfter = f.clock.now() - acquiredAt;
    expect(await slotsInUse(f.store, kh)).toBe(0);
    // Not before the 30 s grace of a create in flight; within one reconcile period (10 s) after it.
    expect(freedAfter).toBeGreaterThan(30_000);
    expect(freedAfter).toBeLessThanOrEqual(40_000 + 100);
  });

  test('a connection drain: A stays a live member, its streams move to B and C, its socket keeps receiving, it serves keepalives but no creates, and no failover lands on it', async () => {
    const [a, , c] = f.replicas as [Replica, Replica, Replica];
    const ids = [await create(a), await create(a)];
    const onC = await create(c);
    const onA = await openResults(a.url, ids[0]!, KEY);
    await driveUntil(f, () => onA.messages.length >= 1);
    expect(await a.gw.gateway.holdConnections()).toBe(true);
    expect(a.gw.gateway.lifecycle.state).toBe('holding');
    const n = onA.messages.length;
    // Past deadAfterMs of fake time: A still heartbeats, so nobody fails its streams over.
    await driveUntil(f, () => onA.messages.length >= n + 4);
    expect(onA.ws.readyState).toBe(onA.ws.OPEN);
    for (const id of ids) expect(['B', 'C']).toContain((await f.store.getRecord(id))!.owner);
    expect(a.gw.gateway.streams.activeCount).toBe(0);
    const m = await f.store.membership(3000);
    expect(m.alive.sort()).toEqual(['A', 'B', 'C']);
    expect(m.draining).toEqual(['A']);
    // Forgotten by a survivor that saw it silent (a store pause): its next heartbeat marks it again.
    await f.store.forgetReplica('A');
    await drive(f, 30);
    expect((await f.store.membership(3000)).draining).toEqual(['A']);
    expect(f.adopted.filter((x) => x.includes(':handover:')).length).toBe(2);
    expect((await call(a.url, 'POST', `/v0.2/streams/${ids[1]}/keepalive`)).status).toBe(200);
    const refused = await call(a.url, 'POST', '/v0.2/streams', { body: frameBody({ interval_seconds: 1 }) });
    expect(refused.status).toBe(503);
    expect(a.gw.gateway.held()).toEqual({ sockets: 1, relays: 0 });
    // C crashes: its streams (its own, and any of A's it took) fail over to B, the one replica not draining.
    const onCnow = [onC, ...ids.filter((id) => f.adopted.includes(`C:handover:${id}`))];
    await halt(c);
    await driveUntil(f, () => onCnow.every((id) => f.adopted.includes(`B:failover:${id}`)));
    expect(f.adopted.filter((x) => x.includes(':failover:')).sort()).toEqual(onCnow.map((id) => `B:failover:${id}`).sort());
    expect(f.ended).toEqual([]);
    onA.ws.close();
    await until(() => a.gw.gateway.held().sockets === 0);
  });

  test('a draining replica that holds no stream refuses creates too (503), and creates go on elsewhere', async () => {
    const [a, b] = f.replicas as [Replica, Replica, Replica];
    expect(await a.gw.gateway.holdConnections()).toBe(true);
    expect((await call(a.url, 'POST', '/v0.2/streams', { body: frameBody({ interval_seconds: 1 }) })).status).toBe(503);
    await create(b);
  });

  test('the last replica standing ends its streams as a single replica does (server_shutdown)', async () => {
    const [a, b, c] = f.replicas as [Replica, Replica, Replica];
    await b.gw.close(2000);
    await c.gw.close(2000);
    const id = await create(a);
    const sock = await openResults(a.url, id, KEY);
    await a.gw.close(2000);
    expect(await sock.closed).toEqual({ code: 1001, reason: 'server_shutdown' });
    expect(f.ended).toEqual(['A:server_shutdown']);
    expect(await slotsInUse(f.store, keyHash(KEY))).toBe(0);
  });
});

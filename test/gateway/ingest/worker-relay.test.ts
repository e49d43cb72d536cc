/**
 * The media worker's supervision on real worker processes, its timing on a fake clock: a start in
 * flight when the worker dies fails with 503 `media_unavailable`; a stalled worker (SIGSTOP) is
 * killed and forked again after the backoff; one more death than the budget leaves it down (no
 * fork, creates refused) until the cool-down passes, when the next relay forks one again; close()
 * takes the worker with it; a start in flight when its worker is replaced for its memory goes on
 * in the next one. The room it joins never answers, so each start stays in flight.
 */
import net from 'node:net';
import { AccessToken } from 'livekit-server-sdk';
import { WorkerRelay } from '../../../src/gateway/ingest/worker-relay';
import type { RestartReason } from '../../../src/gateway/ingest/worker-relay';
import type { StreamSpec } from '../../../src/gateway/legacy/contract/spec';
import type { RelayStart } from '../../../src/gateway/legacy';
import { createLogger } from '../../../src/lib/logger';
import { ServiceError } from '../../../src/lib/errors';
import { testConfig } from '../../helpers/config';
import { FakeClock } from '../../helpers/fake-clock';
import { mediaWorkerScript } from '../../helpers/media-worker-bundle';
import { deadline, until } from '../../helpers/time';

const MEDIA_WORKER = {
  maxRestartsPerMinute: 1,
  stallMs: 2000,
  restartMinMs: 100,
  restartMaxMs: 400,
  relayStallMs: 30_000,
  recycleRssMb: 0,
  failedCooldownMs: 60_000,
};

let silentRoom: net.Server;
const held = new Set<net.Socket>();
let roomUrl: string;

beforeAll(async () => {
  // Accepts and never answers: a join into it stays in flight.
  silentRoom = net.createServer((s) => {
    held.add(s);
    s.on('error', () => undefined);
    s.once('close', () => held.delete(s));
  });
  await new Promise<void>((r) => silentRoom.listen(0, '127.0.0.1', r));
  roomUrl = `ws://127.0.0.1:${(silentRoom.address() as net.AddressInfo).port}`;
});

afterAll(async () => {
  for (const s of held) s.destroy();
  await new Promise((r) => silentRoom.close(r));
});

async function roomStart(streamId: string): Promise<RelayStart> {
  const at = new AccessToken('key', 'secret-secret-secret-secret-secret', { identity: 'legacy-gateway', ttl: 600 });
  at.addGrant({ room: 'cam', roomJoin: true, canSubscribe: true });
  const spec = {
    mode: 'frame',
    frame: { intervalMs: 1000 },
    deprecatedFields: [],
    requestId: `req-${streamId}`,
    transport: 'room',
    source: { transport: 'room', url: roomUrl, token: await at.toJwt() },
  } as unknown as StreamSpec;
  return { spec, streamId, publishUrl: roomUrl, publishToken: 'publish-token', onLost: () => undefined };
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

const codeOf = (p: Promise<unknown>) =>
  p.then(
    () => 'resolved',
    (err: unknown) => (err instanceof ServiceError ? `${err.status} ${err.code}` : String(err)),
  );

test('stall, death past the budget, cool-down: supervision in order, on the fake clock', async () => {
  const clock = new FakeClock();
  const restarts: RestartReason[] = [];
  const base = testConfig().legacy;
  const relay = new WorkerRelay({
    cfg: { ...base, mediaWorker: MEDIA_WORKER },
    logger: createLogger('silent'),
    logLevel: 'silent',
    script: await mediaWorkerScript(),
    clock,
    onRestart: (r) => restarts.push(r),
  });
  const state = () => relay.health().state;
  /** Waits for the worker's state (the bound only keeps a failure from hanging). */
  const reached = (wanted: string, what: string) =>
    deadline(
      until(() => state() === wanted),
      20_000,
      what,
    );
  try {
    expect(relay.health()).toMatchObject({ state: 'idle', pid: undefined });

    // The first relay forks the worker; its start hangs in the silent room.
    const first = codeOf(relay.start(await roomStart('s1')));
    await reached('up', 'the worker up');
    const pid1 = relay.health().pid!;

    // Stopped (SIGSTOP): silent past stallMs, so the watchdog kills it; the start in flight fails.
    process.kill(pid1, 'SIGSTOP');
    expect(await deadline(first, 20_000, 'the start in flight fails')).toBe('503 media_unavailable');
    await reached('restarting', 'the stall noticed');
    expect(alive(pid1)).toBe(false);
    expect(relay.activeCount).toBe(0);
    // Forked again only once the backoff has passed.
    clock.advance(MEDIA_WORKER.restartMinMs - 1);
    expect(restarts).toEqual([]);
    clock.advance(1);
    expect(restarts).toEqual(['stall']);
    await reached('up', 'the second worker up');
    const pid2 = relay.health().pid!;
    expect(pid2).not.toBe(pid1);

    // A second death in the minute is one more than the budget: not forked again.
    const second = codeOf(relay.start(await roomStart('s2')));
    process.kill(pid2, 'SIGKILL');
    expect(await deadline(second, 20_000, 'the start in flight fails')).toBe('503 media_unavailable');
    await reached('failed', 'the worker given up');
    clock.advance(10 * MEDIA_WORKER.restartMaxMs);
    expect(relay.health()).toMatchObject({ state: 'failed', pid: undefined, restarts: 1 });
    expect(await codeOf(relay.start(await roomStart('s3')))).toBe('503 media_unavailable');
    expect(relay.health().pid).toBeUndefined();

    // After the cool-down the next relay forks a worker again.
    clock.advance(MEDIA_WORKER.failedCooldownMs - 10 * MEDIA_WORKER.restartMaxMs - 1);
    expect(state()).toBe('failed');
    clock.advance(1);
    expect(state()).toBe('idle');
    const third = codeOf(relay.start(await roomStart('s4')));
    await reached('up', 'a worker after the cool-down');
    const pid3 = relay.health().pid!;
    expect([pid1, pid2]).not.toContain(pid3);

    // close() ends the start in flight and the worker.
    await relay.close();
    expect(await deadline(third, 20_000, 'the start ends with the worker')).toMatch(/^503 /);
    await deadline(
      until(() => !alive(pid3)),
      20_000,
      'the worker gone',
    );
    expect(restarts).toEqual(['stall']);
  } finally {
    await relay.close();
  }
}, 120_000);

test('a start in flight when its worker is replaced for its memory goes on in the next worker: the create never sees the recycle', async () => {
  const restarts: RestartReason[] = [];
  const base = testConfig().legacy;
  // Every worker is past 1 MiB at its first report: each is replaced as soon as it reports.
  const relay = new WorkerRelay({
    cfg: { ...base, mediaWorker: { ...MEDIA_WORKER, recycleRssMb: 1 } },
    logger: createLogger('silent'),
    logLevel: 'silent',
    script: await mediaWorkerScript(),
    onRestart: (r) => restarts.push(r),
  });
  try {
    let outcome: string | undefined;
    const started = codeOf(relay.start(await roomStart('r1'))).then((o) => (outcome = o));
    await deadline(
      until(() => relay.health().state === 'up'),
      20_000,
      'the first worker up',
    );
    const first = relay.health().pid!;
    // Two recycles: the start, in flight in the silent room, went to the second worker and then the third.
    await deadline(
      until(() => restarts.length >= 2 && relay.health().state === 'up'),
      30_000,
      'two recycles',
    );
    expect(restarts.slice(0, 2)).toEqual(['recycle', 'recycle']);
    expect(relay.health().pid).not.toBe(first);
    expect(outcome).toBeUndefined();
    expect(relay.activeCount).toBe(1);
    // Closing the relay ends it (no worker any more).
    await relay.close();
    expect(await deadline(started, 20_000, 'the start ends with the relay')).toMatch(/^503 /);
  } finally {
    await relay.close();
  }
}, 120_000);

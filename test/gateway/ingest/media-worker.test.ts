/**
 * @jest-environment ./test/media-environment.js
 *
 * The media worker on real processes: a gateway (the CLI bundle) against an emulator in this
 * process, with a native stream (the emulator's publisher), a webrtc stream over WHIP (a wrtc
 * client here) and a customer-room stream (an rtc-node camera here, in another stream's room). The
 * worker, the gateway's only process with native media code, is killed with SIGSEGV, then with
 * SIGKILL, and its successor again while it restarts the room relay: no results socket closes, the
 * native and webrtc streams miss no tick, the room stream's results show new frames again, the
 * worker is forked again and the metrics count it. The gateway's own process
 * maps no WebRTC library. Then create/teardown cycles of a room stream: nothing crashes, and neither
 * process grows beyond a bound. Last, a gateway whose worker dies past its restart budget: the room
 * stream ends `room_disconnected`, /readyz answers 503, room creates 503 `media_unavailable`,
 * native creates go on.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as rtc from '@livekit/rtc-node';
import { mintSubscribeToken } from '../../../src/emulator/room';
import { startEmulator } from '../../../src/emulator/server';
import type { RunningEmulator } from '../../../src/emulator/server';
import { createLogger } from '../../../src/lib/logger';
import { testConfig } from '../../helpers/config';
import { missedTicks } from '../../helpers/fleet';
import { runMain, useMainBundle } from '../../helpers/main-bundle';
import type { MainProcess } from '../../helpers/main-bundle';
import { PatternCamera } from '../../helpers/pattern-camera';
import { mediaLibrariesMapped, udpSockets } from '../../helpers/process-footprint';
import { openResults } from '../../helpers/results-socket';
import type { ResultsSocket } from '../../helpers/results-socket';
import { KEY, KEY_B, clipBody, frameBody, http, tail } from '../../helpers/stack';
import { deadline, sleep, until } from '../../helpers/time';
import { rssKbOf } from '../../helpers/util';
import { startWebrtcSender } from '../../helpers/wrtc-sender';
import type { WebrtcSender } from '../../helpers/wrtc-sender';

const bundle = useMainBundle();
let emulator: RunningEmulator;
let gateway: MainProcess;
let url: string;
let camera: PatternCamera | undefined;
let sender: WebrtcSender | undefined;

beforeAll(async () => {
  const cfg = testConfig({ emulator: { autoPublish: { enabled: false } } });
  emulator = await startEmulator(cfg, createLogger('silent'));
  gateway = runMain(bundle(), ['serve'], {
    PORT: '0',
    HOST: '127.0.0.1',
    UPSTREAM_URL: emulator.url,
    LOG_LEVEL: 'info',
    LEGACY_MAX_STREAMS_PER_KEY: '10',
    LEGACY_LEASE_TTL_SECONDS: '600',
    // Ended streams' records go at once (the cycles' tombstones are not what is measured).
    LEGACY_TOMBSTONE_SECONDS: '1',
    // rtc-node keeps ~1 MiB of every room it left: the worker is replaced past 320 MiB.
    LEGACY_MEDIA_WORKER_RECYCLE_RSS_MB: '320',
  });
  url = String((await deadline(gateway.line('gateway listening'), 30_000, 'gateway boot')).url);
}, 60_000);

afterAll(async () => {
  sender?.close();
  await camera?.close();
  gateway?.child.kill('SIGTERM');
  await gateway?.exited;
  await emulator?.close();
  await rtc.dispose();
}, 60_000);

const roomKeys = () => ({ apiKey: 'emulator-room-key', apiSecret: 'emulator-room-secret-0123456789abcdef' });

/** The `media worker started` lines so far (each names its pid). */
const workerStarts = () => gateway.lines.filter((l) => l.msg === 'media worker started');

async function metric(name: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  return Number(new RegExp(`^${name.replace(/[{}"]/g, (c) => `\\${c}`)} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);
}

/**
 * A customer room (another account's stream) with a camera in it; `token()` mints a subscribe token
 * of an identity of its own (one identity joining twice replaces its first connection).
 */
async function customerRoom(): Promise<{ url: string; token(): Promise<string>; id: string }> {
  const r = await http(emulator.url, 'POST', '/v1beta/streams', { key: KEY_B, body: {} });
  const room = r.body as { id: string; publish: { url: string; token: string } };
  camera = new PatternCamera(0);
  await camera.start(room.publish.url, room.publish.token);
  let n = 0;
  return { url: room.publish.url, token: () => mintSubscribeToken(roomKeys(), room.id, `legacy-gateway-${n++}`, 3600), id: room.id };
}

test('SIGSEGV, then SIGKILL, of the media worker: no socket closes, native and webrtc streams miss no tick, the room stream comes back', async () => {
  // A native stream: the emulator's own publisher feeds it.
  const native = await http(url, 'POST', '/v0.2/streams', { body: frameBody({ interval_seconds: 0.5 }) });
  expect(native.status).toBe(201);
  const nativeId = (native.body as { stream_id: string }).stream_id;
  await http(emulator.url, 'POST', `/_emulator/streams/${nativeId}/publisher`, { body: { fps: 5 } });
  // A webrtc stream over WHIP: its media goes to the emulator's room, never to the gateway.
  sender = await startWebrtcSender({ fps: 10 });
  const webrtc = await http(url, 'POST', '/v0.2/streams', {
    body: { ...frameBody({ interval_seconds: 0.5 }), source: { type: 'webrtc', sdp: sender.offer } },
  });
  expect(webrtc.status).toBe(201);
  const webrtcId = (webrtc.body as { stream_id: string }).stream_id;
  await sender.answer((webrtc.body as { webrtc: { sdp: string } }).webrtc.sdp);
  // A customer-room stream: relayed by the media worker.
  const customer = await customerRoom();
  const room = await http(url, 'POST', '/v0.2/streams', {
    body: {
      ...clipBody({ target_fps: 5, clip_length_seconds: 1, delay_seconds: 0.5 }),
      source: { type: 'room', url: customer.url, token: await customer.token() },
    },
  });
  expect(room.status).toBe(201);
  const roomId = (room.body as { stream_id: string }).stream_id;

  const sockets: Record<string, ResultsSocket> = {};
  for (const [name, id] of [
    ['native', nativeId],
    ['webrtc', webrtcId],
    ['room', roomId],
  ] as const) {
    sockets[name] = await openResults(url, id, KEY, { waitMs: null });
  }
  await deadline(Promise.all(Object.values(sockets).map((s) => s.waitFor(3))), 30_000, 'first results');

  // The gateway's own process: no WebRTC library, no UDP socket. Its worker holds them.
  const gatewayPid = gateway.child.pid!;
  const firstWorker = Number(workerStarts()[0]!.pid);
  expect(mediaLibrariesMapped(firstWorker).length).toBeGreaterThan(0);
  expect({ libraries: mediaLibrariesMapped(gatewayPid), udp: udpSockets(gatewayPid) }).toEqual({ libraries: [], udp: 0 });
  expect(await metric('gateway_media_worker_up')).toBe(1);
  await deadline(
    until(async () => (await metric('gateway_media_worker_resident_memory_bytes')) > 0),
    10_000,
    "the worker's first figures",
  );
  expect(await metric('gateway_media_worker_relays')).toBe(1);
  expect(await http(url, 'GET', '/readyz')).toMatchObject({ status: 200, body: { media_worker: 'up' } });

  /** The newest camera pattern number among the room stream's results (the camera counts up). */
  const newestPattern = () =>
    Math.max(
      -1,
      ...sockets.room!.received.flatMap((r) => (r.message.ok === true ? [tail(String(r.message.result)).pattern?.[1] ?? -1] : [])),
    );
  const workerLines = (msg: string) => gateway.lines.filter((l) => l.msg === msg);
  for (const [n, signal] of [
    [1, 'SIGSEGV'],
    [2, 'SIGKILL'],
  ] as const) {
    const pid = Number(workerStarts().at(-1)!.pid);
    // The camera's next frame number: a result showing it or a later one saw a frame painted after the kill.
    const after = camera!.next;
    const killedAt = Date.now();
    process.kill(pid, signal);
    await deadline(
      until(() => workerStarts().length > n),
      20_000,
      `the media worker forked again after ${signal}`,
    );
    if (signal === 'SIGKILL') {
      // Killed again while it starts the carried relay (the restart logs before the relay's room
      // joins): the relay stays carried, and the next worker starts it.
      const restarted = workerLines('media worker restarted').length;
      process.kill(Number(workerStarts().at(-1)!.pid), 'SIGKILL');
      await deadline(
        until(() => workerLines('media worker restarted').length > restarted),
        20_000,
        'the media worker forked a third time',
      );
    }
    // The room stream's relay started again in the new worker: its results show frames the camera
    // painted after the kill (results of frames buffered before it do not count).
    await deadline(
      until(() => newestPattern() >= after),
      20_000,
      `the room stream's new frames after ${signal}`,
    );
    console.log(`${signal}: room stream's results show new frames ${Date.now() - killedAt} ms after the kill`);
    expect(gateway.lines.some((l) => l.msg === 'media worker died' && l.signal === signal)).toBe(true);
    expect(workerLines('relayed stream lost')).toEqual([]);
    expect(await metric('gateway_media_worker_restarts_total{reason="signal"}')).toBe(signal === 'SIGKILL' ? 3 : 1);
    expect(await metric('gateway_media_worker_up')).toBe(1);
  }

  // No socket closed; the streams whose media never was in the worker lost no tick.
  for (const s of Object.values(sockets)) expect(s.isOpen()).toBe(true);
  expect(missedTicks(sockets.native!.received, nativeId)).toEqual([]);
  expect(missedTicks(sockets.webrtc!.received, webrtcId)).toEqual([]);
  expect({ libraries: mediaLibrariesMapped(gatewayPid), udp: udpSockets(gatewayPid) }).toEqual({ libraries: [], udp: 0 });
  for (const id of [nativeId, webrtcId, roomId]) expect((await http(url, 'DELETE', `/v0.2/streams/${id}`)).status).toBe(200);
  await camera?.close();
  camera = undefined;
}, 180_000);

test('create/teardown cycles of a customer-room stream: the gateway never crashes, neither process grows past a bound', async () => {
  const customer = await customerRoom();
  const cycles = Number(process.env.MEDIA_WORKER_CYCLES ?? 500);
  const cycle = async (key: string) => {
    const created = await http(url, 'POST', '/v0.2/streams', {
      key,
      body: {
        ...clipBody({ target_fps: 2, clip_length_seconds: 1, delay_seconds: 5 }),
        source: { type: 'room', url: customer.url, token: await customer.token() },
      },
    });
    if (created.status !== 201) throw new Error(`create ${created.status}: ${JSON.stringify(created.body)}`);
    expect((await http(url, 'DELETE', `/v0.2/streams/${(created.body as { stream_id: string }).stream_id}`, { key })).status).toBe(200);
  };
  /** `n` cycles, five at a time (two keys' stream limits). */
  const run = async (n: number) => {
    let left = n;
    await Promise.all(
      [KEY, KEY, KEY_B, KEY_B, KEY].map(async (key) => {
        while (left-- > 0) await cycle(key);
      }),
    );
  };
  const worker = () => Number(workerStarts().at(-1)!.pid);
  await run(40); // warm-up: the gateway's heap settles
  await sleep(2000);
  const gateway0 = rssKbOf(gateway.child.pid!);
  const recycled0 = await metric('gateway_media_worker_restarts_total{reason="recycle"}');
  const died0 =
    (await metric('gateway_media_worker_restarts_total{reason="signal"}')) +
    (await metric('gateway_media_worker_restarts_total{reason="exit"}'));
  const t0 = Date.now();
  let workerMostKb = 0;
  const sampler = setInterval(() => (workerMostKb = Math.max(workerMostKb, rssKbOf(worker()))), 250);
  try {
    await run(cycles);
  } finally {
    clearInterval(sampler);
  }
  await sleep(2000);
  const gateway1 = rssKbOf(gateway.child.pid!);
  const recycled = (await metric('gateway_media_worker_restarts_total{reason="recycle"}')) - recycled0;
  console.log(
    `${cycles} room-stream create/teardown cycles in ${((Date.now() - t0) / 1000).toFixed(1)} s: gateway RSS ${(gateway0 / 1024).toFixed(1)} → ${(gateway1 / 1024).toFixed(1)} MiB; ` +
      `worker at most ${(workerMostKb / 1024).toFixed(1)} MiB, replaced ${recycled} times past 320 MiB`,
  );
  // Neither process crashed: the gateway serves on, and no worker died (replacements are recycles).
  expect(gateway.child.exitCode).toBeNull();
  const died =
    (await metric('gateway_media_worker_restarts_total{reason="signal"}')) +
    (await metric('gateway_media_worker_restarts_total{reason="exit"}'));
  expect(died).toBe(died0);
  expect(gateway1 - gateway0).toBeLessThan(64 * 1024);
  // The worker's leak (rtc-node's, per room) is bounded by its replacement.
  expect(recycled).toBeGreaterThanOrEqual(1);
  // Its peak: the bound plus what grows between two reports and while one is replaced (unbounded, 500 cycles pass 600 MiB).
  expect(workerMostKb).toBeLessThan(512 * 1024);
  expect(await metric('gateway_media_worker_relays')).toBe(0);
}, 600_000);

test('a worker that dies past its budget: its stream ends, /readyz 503, room creates 503, native creates go on', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'media-worker-'));
  const configFile = path.join(dir, 'config.json');
  // One restart a minute; down for longer than the test once past it.
  fs.writeFileSync(
    configFile,
    JSON.stringify({ legacy: { mediaWorker: { maxRestartsPerMinute: 1, restartMinMs: 100, failedCooldownMs: 600_000 } } }),
  );
  const gw = runMain(bundle(), ['serve', '--config', configFile], {
    PORT: '0',
    HOST: '127.0.0.1',
    UPSTREAM_URL: emulator.url,
    LOG_LEVEL: 'info',
  });
  try {
    const gwUrl = String((await deadline(gw.line('gateway listening'), 30_000, 'gateway boot')).url);
    const starts = () => gw.lines.filter((l) => l.msg === 'media worker started');
    const customer = await customerRoom();
    const roomBody = async () => ({
      ...clipBody({ target_fps: 2, clip_length_seconds: 1, delay_seconds: 0.5 }),
      source: { type: 'room', url: customer.url, token: await customer.token() },
    });
    const room = await http(gwUrl, 'POST', '/v0.2/streams', { body: await roomBody() });
    expect(room.status).toBe(201);
    const socket = await openResults(gwUrl, (room.body as { stream_id: string }).stream_id, KEY, { waitMs: null });
    await deadline(socket.waitFor(1), 30_000, 'first result');

    process.kill(Number(starts()[0]!.pid), 'SIGKILL');
    await deadline(
      until(() => starts().length === 2),
      20_000,
      'the worker forked again',
    );
    process.kill(Number(starts()[1]!.pid), 'SIGKILL');
    await deadline(
      until(() => gw.lines.some((l) => String(l.msg).startsWith('media worker died too often'))),
      20_000,
      'the worker given up',
    );

    expect(await deadline(socket.closed, 20_000, 'the room stream ends')).toEqual({ code: 1001, reason: 'room_disconnected' });
    expect(await http(gwUrl, 'GET', '/readyz')).toMatchObject({
      status: 503,
      body: { store: true, draining: false, media_worker: 'failed' },
    });
    const refused = await http(gwUrl, 'POST', '/v0.2/streams', { body: await roomBody() });
    expect(refused).toMatchObject({ status: 503, body: { error: 'media_unavailable' } });
    // Retry after the cool-down (10 minutes here), not at once.
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(500);
    const native = await http(gwUrl, 'POST', '/v0.2/streams', { body: frameBody({ interval_seconds: 1 }) });
    expect(native.status).toBe(201);
    expect((await http(gwUrl, 'DELETE', `/v0.2/streams/${(native.body as { stream_id: string }).stream_id}`)).status).toBe(200);
    expect(starts()).toHaveLength(2);
  } finally {
    gw.child.kill('SIGTERM');
    await gw.exited;
    await camera?.close();
    camera = undefined;
  }
}, 120_000);

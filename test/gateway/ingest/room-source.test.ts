/**
 * @jest-environment ./test/media-environment.js
 *
 * Legacy customer-room streams end to end: the "customer room" is another emulator stream's room,
 * where an rtc-node participant paints the emulator's index pattern; the gateway joins it as a
 * subscriber and relays into the legacy stream's upstream room. The emulator's synthetic
 * publisher is off, so every upstream frame came through the relay.
 */
import * as rtc from '@livekit/rtc-node';
import { IngestRelay } from '../../../src/gateway/ingest';
import type { StreamSpec } from '../../../src/gateway/legacy/contract/spec';
import { createLogger } from '../../../src/lib/logger';
import { mintPublishToken, mintSubscribeToken } from '../../../src/emulator/room';
import { signRoomJwt } from '../../emulator/room/harness';
import { KEY, KEY_B, clipBody, http as call, startStack, tail } from '../../helpers/stack';
import { openResults } from '../../helpers/results-socket';
import type { Stack } from '../../helpers/stack';
import { PatternCamera } from '../../helpers/pattern-camera';
import { deadline, until as poll, sleep } from '../../helpers/time';
import { relayedFramesCeiling } from '../../helpers/rate-ceiling';

let stack: Stack;

beforeAll(async () => {
  stack = await startStack({ emulator: { autoPublish: { enabled: false } } });
});

afterAll(async () => {
  await stack?.close();
  // The cameras and the relay under test ran rtc-node in this process (the gateway's runs in its media worker).
  await rtc.dispose();
});

const roomKeys = () => ({ apiKey: stack.cfg.emulator.room.apiKey, apiSecret: stack.cfg.emulator.room.apiSecret });

/** A customer room: an emulator stream of another account, with its publish url and token. */
async function customerRoom(): Promise<{ id: string; url: string; publishToken: string }> {
  const r = await call(stack.emulator.url, 'POST', '/v1beta/streams', { key: KEY_B, body: {} });
  expect(r.status).toBe(201);
  const body = r.body as { id: string; publish: { url: string; token: string } };
  return { id: body.id, url: body.publish.url, publishToken: body.publish.token };
}

async function roomCreate(url: string, token: string, processing: Record<string, unknown> = {}) {
  return call(stack.url, 'POST', '/v0.2/streams', {
    body: {
      ...clipBody({ target_fps: 5, clip_length_seconds: 1, delay_seconds: 0.5, ...processing }),
      source: { type: 'room', url, token },
    },
  });
}

/** Waits for a result whose pattern range satisfies `ok`; returns it. */
async function resultWhere(messages: Record<string, unknown>[], ok: (t: ReturnType<typeof tail>) => boolean, timeoutMs: number) {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const hit = messages.find((m) => m.ok === true && ok(tail(m.result as string)));
    if (hit) return tail(hit.result as string);
    if (Date.now() > until)
      throw new Error(`no matching result in ${messages.length}: ${messages.map((m) => String(m.result).slice(-60)).join(' | ')}`);
    await sleep(100);
  }
}

test('the gateway subscribes to the customer room and relays its pattern frames; a replaced track is followed; the room going away ends the stream', async () => {
  const customer = await customerRoom();
  const camera = new PatternCamera(0);
  const next = new PatternCamera(5000);
  try {
    await camera.start(customer.url, customer.publishToken);
    const token = await mintSubscribeToken(roomKeys(), customer.id, 'legacy-gateway', 120);
    const t0 = performance.now();
    const created = await roomCreate(customer.url, token);
    expect(created.status).toBe(201);
    const body = created.body as Record<string, any>;
    expect(body).toMatchObject({ webrtc: null, turn_servers: null, room: null });
    const id = body.stream_id as string;
    const socket = await openResults(stack.url, id, KEY);
    const results = await socket.waitFor(3, 15_000);
    console.log(`room source: 3 results ${Math.round(performance.now() - t0)} ms after create`);

    // Plausible pattern ranges: painted by the camera, in order; a clip of 1 s at max_fps 5 holds
    // at most 6 frames (how many camera frames 1 s of stream time spans depends on the machine's load).
    for (const r of results) {
      expect(r).toMatchObject({ ok: true, stream_id: id });
      const t = tail(r.result as string);
      expect(t.pattern).not.toBeNull();
      const [a, b] = t.pattern!;
      expect(a).toBeLessThanOrEqual(b);
      expect(b).toBeLessThan(camera.next);
      expect(t.frames).toBeLessThanOrEqual(6);
    }
    const last = tail(results[2]!.result as string).pattern!;
    expect(last[1]).toBeGreaterThan(tail(results[0]!.result as string).pattern![0]);

    // Relayed at target_fps (5), not the camera's 10: counted against a ceiling that load only
    // loosens; and frames keep coming (the next one lands).
    const upstreamFrames = async () =>
      ((await call(stack.emulator.url, 'GET', `/v1beta/streams/${id}`)).body as { last_frame_index: number }).last_frame_index;
    const stored = await upstreamFrames();
    expect(stored + 1).toBeLessThanOrEqual(relayedFramesCeiling(5, performance.now() - t0));
    await deadline(
      poll(async () => (await upstreamFrames()) > stored),
      15_000,
      'more relayed frames upstream',
    );

    // Stream info tells the relayed frames' size (the upstream does not); a relayed stream cannot be spectated.
    const info = await call(stack.url, 'GET', `/v0.2/streams/${id}/info`);
    expect(info.status).toBe(200);
    expect(info.body).toMatchObject({
      stream_id: id,
      source_type: 'room',
      state: 'active',
      frame_width: 320,
      frame_height: 240,
      effective_width: 320,
      effective_height: 240,
    });
    expect((info.body as { inferences_completed: number }).inferences_completed).toBeGreaterThanOrEqual(3);
    const watch = await call(stack.url, 'POST', `/v0.2/streams/${id}/spectate`);
    expect(watch).toMatchObject({ status: 400, body: { error: 'not_native_stream' } });

    // The customer's camera is replaced by another participant's: the relay follows the new track.
    await camera.close();
    await next.start(customer.url, await mintPublishToken(roomKeys(), customer.id, 'camera-2', 60));
    const switched = await resultWhere(socket.messages, (t) => t.pattern !== null && t.pattern[0] >= 5000, 15_000);
    expect(switched.pattern![1]).toBeLessThan(next.next);

    // The customer room goes away (its stream deleted): the legacy stream ends.
    const tDelete = Date.now();
    const del = await call(stack.emulator.url, 'DELETE', `/v1beta/streams/${customer.id}`, { key: KEY_B });
    expect(del.status).toBe(200);
    expect(await socket.closed).toEqual({ code: 1001, reason: 'room_disconnected' });
    console.log(`room source: customer room deleted → stream ended in ${Date.now() - tDelete} ms`);
    expect((await call(stack.emulator.url, 'GET', `/v1beta/streams/${id}`)).body).toMatchObject({ state: 'ended' });
  } finally {
    await camera.close();
    await next.close();
  }
}, 90_000);

test('room tokens that cannot subscribe, and rooms that cannot be joined, are refused with 422', async () => {
  const activeIds = async () =>
    ((await call(stack.emulator.url, 'GET', '/_emulator/state')).body as { streams: { id: string }[] }).streams.map((s) => s.id);
  const before = await activeIds();
  const customer = await customerRoom();
  try {
    const now = Math.floor(Date.now() / 1000);
    const keys = roomKeys();
    const cases: [string, string, string, RegExp][] = [
      ['not a JWT', customer.url, 'not-a-token', /not a JWT/],
      ['expired', customer.url, signRoomJwt(keys, { sub: 'g', exp: now - 60, video: { room: customer.id, roomJoin: true } }), /expired/],
      ['publish-only', customer.url, await mintPublishToken(keys, customer.id, 'g', 60), /subscrib/],
      ['no room join', customer.url, signRoomJwt(keys, { sub: 'g', exp: now + 60, video: { room: customer.id } }), /roomJoin/],
      ['bad url', 'ftp://example.invalid/room', await mintSubscribeToken(keys, customer.id, 'g', 60), /ws:\/\/, wss:\/\//],
      // Well-formed, but the room refuses it (wrong secret): found out by joining.
      [
        'wrong secret',
        customer.url,
        signRoomJwt(
          { ...keys, apiSecret: 'another-secret-0123456789abcdef0123' },
          { sub: 'g', exp: now + 60, video: { room: customer.id, roomJoin: true } },
        ),
        /could not join/,
      ],
    ];
    for (const [name, url, token, message] of cases) {
      const r = await roomCreate(url, token);
      expect([name, r.status]).toEqual([name, 422]);
      const body = r.body as Record<string, any>;
      expect(body.error).toBe('validation_error');
      expect([name, body.message]).toEqual([name, expect.stringMatching(message)]);
      expect(body.details[0].loc[1]).toBe('source');
    }
    // Nothing is left behind: only the customer's own stream is new upstream.
    expect((await activeIds()).filter((id) => !before.includes(id))).toEqual([customer.id]);
  } finally {
    await call(stack.emulator.url, 'DELETE', `/v1beta/streams/${customer.id}`, { key: KEY_B });
  }
}, 90_000);

test('the relay itself: stats, stop on every path (also during setup), one onLost per loss', async () => {
  const relay = new IngestRelay({ cfg: stack.cfg.legacy, logger: createLogger('silent') });
  const customer = await customerRoom();
  const camera = new PatternCamera(0);
  const upstream = async () => {
    const r = await call(stack.emulator.url, 'POST', '/v1beta/streams', { body: {} });
    return r.body as { id: string; publish: { url: string; token: string } };
  };
  const spec = async (): Promise<StreamSpec> =>
    ({
      transport: 'room',
      source: { transport: 'room', url: customer.url, token: await mintSubscribeToken(roomKeys(), customer.id, `relay-${Date.now()}`, 60) },
      mode: 'clip',
      clip: { targetFps: 5, clipLengthMs: 1000, delayMs: 500 },
      intervalMs: 500,
      deprecatedFields: [],
      requestId: null,
    }) as unknown as StreamSpec;
  const readUpstream = async (id: string) => (await call(stack.emulator.url, 'GET', `/v1beta/streams/${id}`)).body as Record<string, any>;
  try {
    await camera.start(customer.url, customer.publishToken);
    const up = await upstream();
    const onLost = jest.fn();
    const media = await relay.start({
      spec: await spec(),
      streamId: up.id,
      publishUrl: up.publish.url,
      publishToken: up.publish.token,
      onLost,
    });
    expect(media).toEqual({ transport: 'room' });
    const until = Date.now() + 10_000;
    while ((relay.stats(up.id)?.framesRelayed ?? 0) < 8 && Date.now() < until) await sleep(100);
    expect(relay.stats(up.id)).toMatchObject({
      transport: 'room',
      fps: 5,
      width: 320,
      height: 240,
      upstreamConnected: true,
      upstreamReconnects: 0,
    });
    expect(relay.stats(up.id)!.framesIn).toBeGreaterThan(relay.stats(up.id)!.framesRelayed);
    expect((await readUpstream(up.id)).last_frame_index).not.toBeNull();

    await relay.stop(up.id);
    expect(relay.activeCount).toBe(0);
    expect(relay.stats(up.id)).toBeUndefined();
    // Nothing publishes any more: frames already on their way may still land (a loaded machine
    // delivers late), then the index stays where it is.
    const unchanged = async () => {
      const frozen = (await readUpstream(up.id)).last_frame_index;
      await sleep(600);
      return (await readUpstream(up.id)).last_frame_index === frozen;
    };
    await deadline(poll(unchanged, 0), 15_000, 'the upstream stream stops receiving frames');
    expect(onLost).not.toHaveBeenCalled();

    // A stop that lands while the relay is being set up: start releases what it built and throws.
    const up2 = await upstream();
    const starting = relay.start({
      spec: await spec(),
      streamId: up2.id,
      publishUrl: up2.publish.url,
      publishToken: up2.publish.token,
      onLost,
    });
    await relay.stop(up2.id);
    await expect(starting).rejects.toMatchObject({ status: 503 });
    expect(relay.activeCount).toBe(0);

    // The customer room goes: onLost once; the session's end path then stops the relay.
    const up3 = await upstream();
    await relay.start({ spec: await spec(), streamId: up3.id, publishUrl: up3.publish.url, publishToken: up3.publish.token, onLost });
    await call(stack.emulator.url, 'DELETE', `/v1beta/streams/${customer.id}`, { key: KEY_B });
    const lostBy = Date.now() + 5000;
    while (onLost.mock.calls.length === 0 && Date.now() < lostBy) await sleep(50);
    await sleep(200);
    expect(onLost).toHaveBeenCalledTimes(1);
    await relay.stop(up3.id);
    expect(relay.activeCount).toBe(0);
    for (const u of [up, up2, up3]) await call(stack.emulator.url, 'DELETE', `/v1beta/streams/${u.id}`);
  } finally {
    await camera.close();
    // Not relay.close(): it would dispose rtc-node (process-wide) under the cameras of later tests; afterAll does.
  }
}, 90_000);

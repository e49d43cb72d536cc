/**
 * @jest-environment ./test/media-environment.js
 *
 * Legacy /v0.2 media transports end to end, with Chromium (fake camera) as the legacy client:
 * native (livekit-client publishes into the upstream room the create response names); webrtc over
 * WHIP (the default: the page's offer goes to the upstream room's WHIP endpoint and the room's
 * answer comes back, so the camera reaches the room directly, at its own frame rate); webrtc through
 * the relay (`legacy.webrtc.mode: relay`: the gateway answers and relays at the session's rate).
 * The emulator's synthetic publisher is off: results prove the client's media really arrived.
 */
import http from 'node:http';
import path from 'node:path';
import express from 'express';
import type { Page } from 'playwright-core';
import { closeServer, listen } from '../../src/lib/listen';
import { KEY, clipBody, frameBody, http as call, startStack, tail } from '../helpers/stack';
import { openResults } from '../helpers/results-socket';
import type { Stack } from '../helpers/stack';
import { bundleScript, launchBrowser, servePage } from './helpers';
import type { TestBrowser } from './helpers';
import { deadline, until } from '../helpers/time';
import { relayedFramesCeiling } from '../helpers/rate-ceiling';

/** What the emulator's room names to WHIP clients in `Link` headers (the legacy `turn_servers`). */
const ROOM_ICE = [{ urls: ['turn:turn.example:3478?transport=udp'], username: 'room-user', credential: 'room-pass' }];

let whip: Stack;
let relay: Stack;
let browser: TestBrowser;
let pages: http.Server;
let pageUrl: string;

beforeAll(async () => {
  const emulator = { autoPublish: { enabled: false }, room: { whip: { iceServers: ROOM_ICE } } };
  const [w, r, script, b] = await Promise.all([
    startStack({ emulator }),
    startStack({ emulator, legacy: { webrtc: { mode: 'relay' } } }),
    bundleScript(path.join(__dirname, 'pages/legacy-client.ts')),
    launchBrowser(['--use-fake-device-for-media-stream=fps=30']),
  ]);
  whip = w;
  relay = r;
  browser = b;
  const app = express();
  servePage(app, '/legacy', script);
  pages = http.createServer(app);
  pageUrl = `http://127.0.0.1:${await listen(pages, 0, '127.0.0.1')}/legacy`;
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await whip?.close();
  await relay?.close();
  if (pages) await closeServer(pages);
});

async function openPage(): Promise<Page & { consoleErrors: string[] }> {
  const page = await browser.newPage();
  await page.goto(pageUrl);
  return page;
}

/** The upstream stream as the emulator reports it. */
async function upstreamStream(stack: Stack, id: string): Promise<Record<string, any>> {
  const r = await call(stack.emulator.url, 'GET', `/v1beta/streams/${id}`);
  expect(r.status).toBe(200);
  return r.body as Record<string, any>;
}

/** The first `n` results, all ok and about frames that really arrived. */
async function expectResults(stack: Stack, streamId: string, n: number) {
  const socket = await openResults(stack.url, streamId, KEY);
  const results = await socket.waitFor(n, 15_000);
  for (const r of results) {
    expect(r).toMatchObject({ stream_id: streamId, ok: true, error: null });
    expect(tail(r.result as string).frames).toBeGreaterThan(0);
  }
  return { socket, results };
}

const activeIds = async (stack: Stack) =>
  ((await call(stack.emulator.url, 'GET', '/_emulator/state')).body as { streams: { id: string }[] }).streams.map((s) => s.id);

test('native: livekit-client publishes the camera into the room from the create response; results arrive', async () => {
  const page = await openPage();
  try {
    const t0 = Date.now();
    const created = await page.evaluate(([gw, key, body]) => window.legacyTest.createNative(gw, key, body), [
      whip.url,
      KEY,
      clipBody(),
    ] as const);
    expect(created.status).toBe(201);
    expect(created.body.webrtc).toBeNull();
    const { url, token } = created.body.room as { url: string; token: string };
    await page.evaluate(([u, t]) => window.legacyTest.publish(u, t), [url, token] as const);
    const { socket, results } = await expectResults(whip, created.body.stream_id, 2);
    console.log(`native: 2 results ${Date.now() - t0} ms after create; first ${JSON.stringify(tail(results[0]!.result as string))}`);
    expect((await upstreamStream(whip, created.body.stream_id)).last_frame_index).toBeGreaterThan(0);
    const del = await call(whip.url, 'DELETE', `/v0.2/streams/${created.body.stream_id}`);
    expect(del.status).toBe(200);
    expect(await socket.closed).toEqual({ code: 1001, reason: 'client_requested' });
    await page.evaluate(() => window.legacyTest.leave());
    expect(page.consoleErrors).toEqual([]);
  } finally {
    await page.close();
  }
}, 90_000);

describe('webrtc over WHIP (the default)', () => {
  test("the page's offer is published into the room: the room's answer and ICE servers come back, the camera arrives at its own rate, a 3 s stall goes on, closing the page ends the stream", async () => {
    const page = await openPage();
    let closed = false;
    try {
      const t0 = Date.now();
      const created = await page.evaluate(([gw, key, body]) => window.legacyTest.createWebrtc(gw, key, body, { deprecatedField: false }), [
        whip.url,
        KEY,
        clipBody({ target_fps: 2, clip_length_seconds: 1, delay_seconds: 0.5 }),
      ] as const);
      expect(created.status).toBe(201);
      const answerMs = Date.now() - t0;
      expect(Object.keys(created.body).sort()).toEqual(['lease', 'room', 'stream_id', 'turn_servers', 'webrtc']);
      expect(created.body.webrtc.type).toBe('answer');
      expect(created.body.webrtc.sdp).toMatch(/a=candidate:/); // the room's candidates inside: legacy clients cannot trickle
      expect(created.body.turn_servers).toEqual([
        { urls: 'turn:turn.example:3478?transport=udp', username: 'room-user', credential: 'room-pass' },
      ]);
      expect(created.body.room).toBeNull();
      const id = created.body.stream_id as string;
      const { socket, results } = await expectResults(whip, id, 2);
      const firstResultMs = Date.now() - t0;
      expect(await page.evaluate(() => window.legacyTest.peerState())).toBe('connected');
      // The room holds the page's own peer: the gateway relays nothing.
      expect(whip.emulator.emulator.room.stats(id)).toMatchObject({
        publishers: 1,
        publication: { identity: expect.stringContaining(id) },
      });

      // The upstream stores what the camera sends, not the session's 2 fps.
      // Counted, not timed: of 30 more frames the page sends, the upstream comes to store at least
      // 80 % (loopback loses few), each one the page's own (its peer is the room's publisher, above).
      const sentNow = () => page.evaluate(() => window.legacyTest.framesSent());
      const storedNow = async () => (await upstreamStream(whip, id)).last_frame_index as number;
      const [sent0, stored0] = [await sentNow(), await storedNow()];
      await deadline(
        until(async () => (await sentNow()) - sent0 >= 30),
        30_000,
        'the page sends 30 frames',
      );
      const sent = (await sentNow()) - sent0;
      await deadline(
        until(async () => (await storedNow()) - stored0 >= Math.floor(0.8 * sent)),
        30_000,
        'the upstream stores them',
      );
      console.log(
        `webrtc over WHIP: answer ${answerMs} ms, 2 results ${firstResultMs} ms after create; the page sent ${sent} frames, the upstream stored ${(await storedNow()) - stored0} by then`,
      );

      // A stall of 3 s (no video sent, the peer connection kept) does not end it: results go on after it.
      await page.evaluate(() => window.legacyTest.stall(3000));
      const afterStall = socket.messages.length;
      await deadline(socket.waitFor(afterStall + 2, 15_000), 20_000, 'results after the stall');
      expect((await upstreamStream(whip, id)).state).toBe('active');

      // A keepalive renews the upstream lease; native clients alone get a room token.
      const ka = await call(whip.url, 'POST', `/v0.2/streams/${id}/keepalive`);
      expect(ka.status).toBe(200);
      expect(ka.body).toMatchObject({ status: 'ok', state: 'active', room_token: null });
      console.log(`webrtc over WHIP: first result ${JSON.stringify(tail(results[0]!.result as string))}`);

      const tClose = Date.now();
      await page.close();
      closed = true;
      expect(await deadline(socket.closed, 30_000, 'the stream ends')).toEqual({ code: 1001, reason: 'webrtc_disconnected' });
      console.log(
        `webrtc over WHIP: page closed → stream ended in ${Date.now() - tClose} ms (bound: legacy.webrtc.framesLostMs 10 s + a check)`,
      );
      expect((await call(whip.url, 'POST', `/v0.2/streams/${id}/keepalive`)).status).toBe(404);
      expect((await upstreamStream(whip, id)).state).toBe('ended');
    } finally {
      if (!closed) await page.close();
    }
  }, 120_000);

  test('deprecated top-level offer, frame mode: results arrive; closing the peer connection ends the stream', async () => {
    const page = await openPage();
    try {
      const body = {
        processing: { sampling_ratio: 0.1, fps: 30, clip_length_seconds: 1, delay_seconds: 0.5 },
        inference: { prompt: 'What happens?', backend: 'svc', model: 'local/analyzer' },
      };
      const created = await page.evaluate(([gw, key, b]) => window.legacyTest.createWebrtc(gw, key, b, { deprecatedField: true }), [
        whip.url,
        KEY,
        body,
      ] as const);
      expect(created.status).toBe(201);
      expect(created.body.webrtc.sdp).toMatch(/a=candidate:/);
      const clip = await expectResults(whip, created.body.stream_id, 1);
      clip.socket.ws.close();
      await call(whip.url, 'DELETE', `/v0.2/streams/${created.body.stream_id}`);

      const f = await page.evaluate(([gw, key, b]) => window.legacyTest.createWebrtc(gw, key, b, { deprecatedField: false }), [
        whip.url,
        KEY,
        frameBody(),
      ] as const);
      expect(f.status).toBe(201);
      const { socket } = await expectResults(whip, f.body.stream_id, 2);
      const tClose = Date.now();
      await page.evaluate(() => window.legacyTest.closePeer());
      expect(await deadline(socket.closed, 30_000, 'the stream ends')).toEqual({ code: 1001, reason: 'webrtc_disconnected' });
      console.log(`webrtc over WHIP: peer connection closed → stream ended in ${Date.now() - tClose} ms`);
    } finally {
      await page.close();
    }
  }, 90_000);

  test("an H264-only offer goes to the room unchanged and comes back as the room's refusal; garbage is refused before anything is created", async () => {
    const page = await openPage();
    const before = await activeIds(whip);
    try {
      const h264 = await page.evaluate(
        ([gw, key, body]) => window.legacyTest.createWebrtc(gw, key, body, { deprecatedField: false, mungeOffer: 'h264-only' }),
        [whip.url, KEY, clipBody()] as const,
      );
      expect(h264.status).toBe(422);
      expect(h264.body).toMatchObject({ error: 'validation_error', details: [{ loc: ['body', 'source', 'sdp'] }] });
      expect(h264.body.message).toBe(
        "the service's media room refused the offer: the offer's video codecs (H264) cannot be decoded by this room; offer VP8, VP9 or AV1",
      );
      const garbage = await call(whip.url, 'POST', '/v0.2/streams', { body: { ...clipBody(), webrtc: { type: 'offer', sdp: 'hello' } } });
      expect(garbage.status).toBe(422);
      expect(garbage.body).toMatchObject({ error: 'validation_error', details: [{ loc: ['body', 'webrtc', 'sdp'] }] });
      expect((await activeIds(whip)).filter((id) => !before.includes(id))).toEqual([]);
    } finally {
      await page.close();
    }
  }, 90_000);
});

describe('webrtc through the relay (legacy.webrtc.mode: relay)', () => {
  test('the gateway answers and relays at the clip rate; closing the page ends the stream', async () => {
    const page = await openPage();
    let closed = false;
    try {
      const t0 = performance.now();
      const created = await page.evaluate(([gw, key, body]) => window.legacyTest.createWebrtc(gw, key, body, { deprecatedField: false }), [
        relay.url,
        KEY,
        clipBody({ target_fps: 2, clip_length_seconds: 1, delay_seconds: 0.5 }),
      ] as const);
      expect(created.status).toBe(201);
      expect(created.body.webrtc.sdp).toMatch(/a=candidate:/);
      expect(created.body.turn_servers).toEqual([]); // legacy.turnServers: the room's servers are not the relay's
      const id = created.body.stream_id as string;
      const { socket } = await expectResults(relay, id, 2);
      expect((await relay.gateway.gateway.store.getRecord(id))?.pinned).toBe(true);
      // Relayed at the session's rate (target_fps 2), not the camera's 30 fps: counted against a
      // ceiling that load only loosens; and frames keep coming (the next one lands).
      const stored = (await upstreamStream(relay, id)).last_frame_index as number;
      expect(stored + 1).toBeLessThanOrEqual(relayedFramesCeiling(2, performance.now() - t0));
      const more = async () => ((await upstreamStream(relay, id)).last_frame_index as number) > stored;
      await deadline(until(more), 15_000, 'more relayed frames upstream');
      const tClose = Date.now();
      await page.close();
      closed = true;
      expect(await socket.closed).toEqual({ code: 1001, reason: 'webrtc_disconnected' });
      console.log(`webrtc relay: page closed → stream ended in ${Date.now() - tClose} ms`);
    } finally {
      if (!closed) await page.close();
    }
  }, 90_000);

  test('an H264-only offer is refused by the gateway itself (wrtc cannot decode it), before anything is created', async () => {
    const page = await openPage();
    const before = await activeIds(relay);
    try {
      const h264 = await page.evaluate(
        ([gw, key, body]) => window.legacyTest.createWebrtc(gw, key, body, { deprecatedField: false, mungeOffer: 'h264-only' }),
        [relay.url, KEY, clipBody()] as const,
      );
      expect(h264.status).toBe(422);
      expect(h264.body.message).toMatch(/H264.*cannot be decoded by this service.*VP8, VP9 or AV1/);
      expect((await activeIds(relay)).filter((id) => !before.includes(id))).toEqual([]);
    } finally {
      await page.close();
    }
  }, 60_000);
});

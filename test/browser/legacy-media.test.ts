/**
 * @jest-environment ./test/media-environment.js
 *
 * Legacy /v0.2 media transports end to end, with Chromium (fake camera) as the legacy client:
 * native (livekit-client publishes into the upstream room the create response names) and webrtc
 * (the page offers, the gateway answers and relays into the upstream room). The emulator's
 * synthetic publisher is off: results prove the client's media really arrived.
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
import { sleep } from '../helpers/time';

let stack: Stack;
let browser: TestBrowser;
let pages: http.Server;
let pageUrl: string;

beforeAll(async () => {
  const [s, script, b] = await Promise.all([
    startStack({ emulator: { autoPublish: { enabled: false } } }),
    bundleScript(path.join(__dirname, 'pages/legacy-client.ts')),
    launchBrowser(['--use-fake-device-for-media-stream=fps=30']),
  ]);
  stack = s;
  browser = b;
  const app = express();
  servePage(app, '/legacy', script);
  pages = http.createServer(app);
  pageUrl = `http://127.0.0.1:${await listen(pages, 0, '127.0.0.1')}/legacy`;
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await stack?.close();
  if (pages) await closeServer(pages);
});

async function openPage(): Promise<Page & { consoleErrors: string[] }> {
  const page = await browser.newPage();
  await page.goto(pageUrl);
  return page;
}

/** The upstream stream as the emulator reports it. */
async function upstreamStream(id: string): Promise<Record<string, any>> {
  const r = await call(stack.emulator.url, 'GET', `/v1beta/streams/${id}`);
  expect(r.status).toBe(200);
  return r.body as Record<string, any>;
}

/** The first `n` results, all ok and about frames that really arrived. */
async function expectResults(streamId: string, n: number) {
  const socket = await openResults(stack.url, streamId, KEY);
  const results = await socket.waitFor(n, 15_000);
  for (const r of results) {
    expect(r).toMatchObject({ stream_id: streamId, ok: true, error: null });
    expect(tail(r.result as string).frames).toBeGreaterThan(0);
  }
  return { socket, results };
}

test('native: livekit-client publishes the camera into the room from the create response; results arrive', async () => {
  const page = await openPage();
  try {
    const t0 = Date.now();
    const created = await page.evaluate(([gw, key, body]) => window.legacyTest.createNative(gw, key, body), [
      stack.url,
      KEY,
      clipBody(),
    ] as const);
    expect(created.status).toBe(201);
    expect(created.body.webrtc).toBeNull();
    const { url, token } = created.body.room as { url: string; token: string };
    await page.evaluate(([u, t]) => window.legacyTest.publish(u, t), [url, token] as const);
    const { socket, results } = await expectResults(created.body.stream_id, 2);
    console.log(`native: 2 results ${Date.now() - t0} ms after create; first ${JSON.stringify(tail(results[0]!.result as string))}`);
    expect((await upstreamStream(created.body.stream_id)).last_frame_index).toBeGreaterThan(0);
    const del = await call(stack.url, 'DELETE', `/v0.2/streams/${created.body.stream_id}`);
    expect(del.status).toBe(200);
    expect(await socket.closed).toEqual({ code: 1001, reason: 'client_requested' });
    await page.evaluate(() => window.legacyTest.leave());
    expect(page.consoleErrors).toEqual([]);
  } finally {
    await page.close();
  }
}, 90_000);

test('webrtc (source): the page offers, the gateway answers and relays at the clip rate; closing the page ends the stream', async () => {
  const page = await openPage();
  let closed = false;
  try {
    const t0 = Date.now();
    const created = await page.evaluate(([gw, key, body]) => window.legacyTest.createWebrtc(gw, key, body, { deprecatedField: false }), [
      stack.url,
      KEY,
      clipBody({ target_fps: 2, clip_length_seconds: 1, delay_seconds: 0.5 }),
    ] as const);
    expect(created.status).toBe(201);
    const answerMs = Date.now() - t0;
    expect(Object.keys(created.body).sort()).toEqual(['lease', 'room', 'stream_id', 'turn_servers', 'webrtc']);
    expect(created.body.webrtc.type).toBe('answer');
    expect(created.body.webrtc.sdp).toMatch(/a=candidate:/); // server candidates inside: legacy clients cannot trickle
    expect(created.body.turn_servers).toEqual([]);
    expect(created.body.room).toBeNull();
    const id = created.body.stream_id as string;
    const { socket, results } = await expectResults(id, 2);
    const firstResultMs = Date.now() - t0;
    expect(await page.evaluate(() => window.legacyTest.peerState())).toBe('connected');

    // A keepalive renews the upstream lease and hands the relay a fresh publish token; media goes on.
    const ka = await call(stack.url, 'POST', `/v0.2/streams/${id}/keepalive`);
    expect(ka.status).toBe(200);
    expect(ka.body).toMatchObject({ status: 'ok', state: 'active', room_token: null }); // only native clients get a token

    // Relayed at the session's rate (target_fps 2), not the camera's 30 fps.
    await sleep(2500);
    const up = await upstreamStream(id);
    expect(up.recent_fps).toBeGreaterThan(0.5);
    expect(up.recent_fps).toBeLessThanOrEqual(2.5);
    console.log(
      `webrtc: answer ${answerMs} ms, 2 results ${firstResultMs} ms after create; upstream ${up.recent_fps} fps; ` +
        `first ${JSON.stringify(tail(results[0]!.result as string))}`,
    );

    const tClose = Date.now();
    await page.close();
    closed = true;
    expect(await socket.closed).toEqual({ code: 1001, reason: 'webrtc_disconnected' });
    console.log(`webrtc: page closed → stream ended in ${Date.now() - tClose} ms`);
    const after = await call(stack.url, 'POST', `/v0.2/streams/${id}/keepalive`);
    expect(after.status).toBe(404);
    expect((await upstreamStream(id)).state).toBe('ended');
  } finally {
    if (!closed) await page.close();
  }
}, 90_000);

test('webrtc (deprecated top-level offer, frame mode): results arrive; closing the peer connection ends the stream', async () => {
  const page = await openPage();
  try {
    const body = {
      processing: { sampling_ratio: 0.1, fps: 30, clip_length_seconds: 1, delay_seconds: 0.5 },
      inference: { prompt: 'What happens?', backend: 'svc', model: 'local/analyzer' },
    };
    const created = await page.evaluate(([gw, key, b]) => window.legacyTest.createWebrtc(gw, key, b, { deprecatedField: true }), [
      stack.url,
      KEY,
      body,
    ] as const);
    expect(created.status).toBe(201);
    expect(created.body.webrtc.sdp).toMatch(/a=candidate:/);
    const clip = await expectResults(created.body.stream_id, 1);
    clip.socket.ws.close();

    const frame = await openPage();
    try {
      const f = await frame.evaluate(([gw, key, b]) => window.legacyTest.createWebrtc(gw, key, b, { deprecatedField: false }), [
        stack.url,
        KEY,
        frameBody(),
      ] as const);
      expect(f.status).toBe(201);
      const { socket } = await expectResults(f.body.stream_id, 2);
      const tClose = Date.now();
      console.log(tClose, 'closing peer');
      await frame.evaluate(() => window.legacyTest.closePeer());
      expect(await socket.closed).toEqual({ code: 1001, reason: 'webrtc_disconnected' });
      console.log(`webrtc: peer connection closed → stream ended in ${Date.now() - tClose} ms`);
    } finally {
      await frame.close();
    }
    await call(stack.url, 'DELETE', `/v0.2/streams/${created.body.stream_id}`);
  } finally {
    await page.close();
  }
}, 90_000);

test('webrtc: an offer whose video is H264 only, or garbage, is refused with 422 before any stream is left behind', async () => {
  const page = await openPage();
  const activeIds = async () =>
    ((await call(stack.emulator.url, 'GET', '/_emulator/state')).body as { streams: { id: string }[] }).streams.map((s) => s.id);
  const before = await activeIds();
  try {
    const h264 = await page.evaluate(
      ([gw, key, body]) => window.legacyTest.createWebrtc(gw, key, body, { deprecatedField: false, mungeOffer: 'h264-only' }),
      [stack.url, KEY, clipBody()] as const,
    );
    expect(h264.status).toBe(422);
    expect(h264.body).toMatchObject({ error: 'validation_error' });
    expect(h264.body.message).toMatch(/H264.*cannot be decoded.*VP8, VP9 or AV1/);
    expect(h264.body.details[0].loc).toEqual(['body', 'source', 'sdp']);

    const garbage = await call(stack.url, 'POST', '/v0.2/streams', { body: { ...clipBody(), webrtc: { type: 'offer', sdp: 'hello' } } });
    expect(garbage.status).toBe(422);
    expect(garbage.body).toMatchObject({ error: 'validation_error', details: [{ loc: ['body', 'webrtc', 'sdp'] }] });

    // No upstream stream stays active.
    expect((await activeIds()).filter((id) => !before.includes(id))).toEqual([]);
  } finally {
    await page.close();
  }
}, 90_000);

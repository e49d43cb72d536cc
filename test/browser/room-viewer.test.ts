/**
 * @jest-environment ./test/media-environment.js
 *
 * The provider's viewer flow with livekit-client 2.23 in headless Chromium: a page gets
 * `{view}` from POST /v1beta/streams/{id}/viewer-token of a real emulator, connects with it, and
 * renders the stream's video: the synthetic test pattern, whose index is read back from the page's
 * pixels. Publishing with the same token is refused.
 */
import http from 'node:http';
import path from 'node:path';
import express from 'express';
import type { Page } from 'playwright-core';
import { SYNTHETIC_IDENTITY } from '../../src/emulator/app';
import { decodePattern } from '../../src/emulator/frames/pattern';
import { startEmulator } from '../../src/emulator/server';
import type { RunningEmulator } from '../../src/emulator/server';
import { closeServer, listen } from '../../src/lib/listen';
import { createLogger } from '../../src/lib/logger';
import { http as request } from '../helpers/stack';
import { TEST_PUBLISHER, testConfig } from '../helpers/config';
import { deadline, sleep, until } from '../helpers/time';
import { bundleScript, launchBrowser, servePage } from './helpers';
import type { TestBrowser } from './helpers';
import type { ReceivedVideo } from './pages/room-client';

let emu: RunningEmulator;
let pages: http.Server;
let pagesUrl: string;
let browser: TestBrowser;

beforeAll(async () => {
  const cfg = testConfig({ emulator: { autoPublish: { ...TEST_PUBLISHER, width: 320, height: 240 } } });
  const [running, script] = await Promise.all([
    startEmulator(cfg, createLogger('silent')),
    bundleScript(path.join(__dirname, 'pages/room-client.ts')),
  ]);
  emu = running;
  // The page comes from another origin than the emulator, as a customer's dashboard would.
  const app = express();
  servePage(app, '/room-client', script);
  pages = http.createServer(app);
  pagesUrl = `http://127.0.0.1:${await listen(pages, 0, '127.0.0.1')}`;
  browser = await launchBrowser();
}, 60_000);

afterAll(async () => {
  await browser?.close();
  if (pages) await closeServer(pages);
  await emu?.close();
});

async function pollReceived(page: Page, minFrames: number, timeoutMs: number): Promise<ReceivedVideo> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const got = await page.evaluate(() => window.roomTest.received());
    if (got && got.frames >= minFrames && got.width > 0) return got;
    if (Date.now() > end) throw new Error(`page received ${JSON.stringify(got)}`);
    await sleep(100);
  }
}

/** The pattern index of the frame the page shows now (null: no pattern there). */
async function shownIndex(page: Page): Promise<number | null> {
  const shot = await page.evaluate(() => window.roomTest.snapshot());
  if (!shot) return null;
  return decodePattern({ width: shot.width, height: shot.height, data: Buffer.from(shot.rgb, 'base64') });
}

test('a livekit-client page joined with a viewer token renders the stream’s test pattern and cannot publish', async () => {
  const created = await request(emu.url, 'POST', '/v1beta/streams', { body: {} });
  const id = (created.body as { id: string }).id;
  const r = await request(emu.url, 'POST', `/v1beta/streams/${id}/viewer-token`);
  expect(r.status).toBe(200);
  const { view } = r.body as { view: { url: string; token: string } };

  const page = await browser.newPage();
  try {
    await page.goto(`${pagesUrl}/room-client`);
    await page.evaluate(([url, token]) => window.roomTest.subscribe(url, token), [view.url, view.token] as const);
    const seen = await pollReceived(page, 10, 20_000);
    expect(seen.participantIdentity).toBe(SYNTHETIC_IDENTITY);
    expect([seen.width, seen.height]).toEqual([320, 240]);

    // What the page shows is a frame of the stream: its index is one the stream has stored.
    let index: number | null = null;
    await deadline(
      until(async () => (index = await shownIndex(page)) !== null),
      10_000,
      'a decodable pattern on the page',
    );
    const stream = async () =>
      (await request(emu.url, 'GET', `/v1beta/streams/${id}`)).body as { first_available_frame_index: number; last_frame_index: number };
    await deadline(
      until(async () => (await stream()).last_frame_index >= index!),
      10_000,
      `frame ${index} stored`,
    );
    expect(index!).toBeGreaterThanOrEqual((await stream()).first_available_frame_index);
    const later = await pollReceived(page, seen.frames + 10, 10_000);
    expect(later.frames).toBeGreaterThan(seen.frames);

    expect(await page.evaluate(() => window.roomTest.tryPublishCamera())).toMatch(/insufficient permissions/);
    await page.evaluate(() => window.roomTest.leave());
    expect(await page.evaluate(() => window.roomTest.events())).toEqual([`subscribed:${seen.trackSid}`, 'disconnected:1']);
  } finally {
    await page.close();
  }
}, 120_000);

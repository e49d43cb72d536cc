/**
 * @jest-environment ./test/media-environment.js
 *
 * livekit-client 2.23 in headless Chromium (fake camera) publishes into an emulator room; a
 * second page subscribes to it.
 */
import path from 'node:path';
import type { Page } from 'playwright-core';
import { mintPublishToken, mintSubscribeToken } from '../../src/emulator/room';
import { TEST_KEYS, meanLuma, startRoomHarness } from '../emulator/room/harness';
import type { RoomHarness } from '../emulator/room/harness';
import { bundleScript, launchBrowser, servePage } from './helpers';
import type { TestBrowser } from './helpers';
import type { PublishResult, ReceivedVideo } from './pages/room-client';
import { sleep } from '../helpers/time';

let h: RoomHarness;
let browser: TestBrowser;

beforeAll(async () => {
  const [harness, script] = await Promise.all([startRoomHarness(), bundleScript(path.join(__dirname, 'pages/room-client.ts'))]);
  h = harness;
  servePage(h.app, '/room-client', script);
  browser = await launchBrowser();
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await h?.close();
});

async function openClient(): Promise<Page & { consoleErrors: string[] }> {
  const page = await browser.newPage();
  await page.goto(`${h.httpUrl}/room-client`);
  return page;
}

async function pollReceived(page: Page, minFrames: number, timeoutMs: number): Promise<ReceivedVideo> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const got = await page.evaluate(() => window.roomTest.received());
    if (got && got.frames >= minFrames && got.width > 0) return got;
    if (Date.now() > deadline) throw new Error(`page received ${JSON.stringify(got)}`);
    await sleep(100);
  }
}

test('the fake camera, published with simulcast at 1280x720, arrives decoded at full size', async () => {
  const sink = h.openRoom('browser-pub');
  const publisher = await openClient();
  const viewer = await openClient();
  try {
    const token = await mintPublishToken(TEST_KEYS, 'browser-pub', 'browser-cam', 60);
    const result: PublishResult = await publisher.evaluate(
      ([url, t]) => window.roomTest.publish(url, t, { width: 1280, height: 720, simulcast: true }),
      [h.wsUrl, token] as const,
    );
    expect(result.trackSid).toMatch(/^TR_/);
    expect(result.serverVersion).toBeTruthy();

    await sink.until(() => sink.count >= 20, 10000, '20 frames');
    const cpu0 = process.cpuUsage();
    const count0 = sink.count;
    const t0 = Date.now();
    await sleep(2000);
    // Frames keep coming (how many a second is a figure of this machine's load, printed below).
    await sink.until(() => sink.count >= count0 + 20, 10000, '20 more frames');
    const cpu = process.cpuUsage(cpu0);
    const fps = ((sink.count - count0) * 1000) / (Date.now() - t0);
    const cpuPct = Math.round(((cpu.user + cpu.system) / 1000 / (Date.now() - t0)) * 100);
    expect(sink.last!.format).toBe('i420');
    expect([sink.last!.width, sink.last!.height]).toEqual([1280, 720]);
    expect(meanLuma(sink.last!)).toBeGreaterThan(5); // the fake camera's picture, not black
    expect(h.server.stats('browser-pub')).toMatchObject({ publishers: 1, width: 1280, height: 720 });

    // Bonus: a browser subscriber (falls back from /rtc/v1 to /rtc) sees the video.
    await viewer.evaluate(([url, t]) => window.roomTest.subscribe(url, t), [
      h.wsUrl,
      await mintSubscribeToken(TEST_KEYS, 'browser-pub', 'browser-viewer', 60),
    ] as const);
    const seen = await pollReceived(viewer, 10, 10000);
    expect(seen.trackSid).toBe(result.trackSid);
    expect(seen.participantIdentity).toBe('browser-cam');
    const relayCpu0 = process.cpuUsage();
    const t1 = Date.now();
    await sleep(2000);
    const relayCpu = process.cpuUsage(relayCpu0);
    const relayPct = Math.round(((relayCpu.user + relayCpu.system) / 1000 / (Date.now() - t1)) * 100);
    const seenLater = await pollReceived(viewer, seen.frames + 20, 5000);
    console.log(
      `livekit-client: connected ${Math.round(result.connectMs)} ms, published ${Math.round(result.publishMs)} ms; ` +
        `sink ${JSON.stringify([...sink.sizes])} at ${fps.toFixed(1)} fps, server process ${cpuPct}% of one core; ` +
        `browser viewer ${seenLater.width}x${seenLater.height}, ${seenLater.frames - seen.frames} frames in ~2 s, ` +
        `server process with the relay ${relayPct}% of one core`,
    );

    await publisher.evaluate(() => window.roomTest.leave());
    await viewer.evaluate(() => window.roomTest.leave());
    expect(await publisher.evaluate(() => window.roomTest.events())).toEqual(['disconnected:1']);
    expect(publisher.consoleErrors).toEqual([]);
  } finally {
    await publisher.close();
    await viewer.close();
  }
}, 120_000);

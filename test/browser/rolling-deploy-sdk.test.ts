/**
 * @jest-environment ./test/media-environment.js
 *
 * The published browser SDK (`@overshoot/sdk` 0.1.0-alpha.2 in Chromium, sending its fake camera
 * over webrtc) against a fleet behind a real load balancer, on real processes: three replicas on
 * the provider's profile (its `overshoot` backend is the SDK's default, its keys `ovs-…`) behind
 * HAProxy on Redis. Its offer is published into the upstream's room over WHIP, so the camera goes
 * straight to the room: no replica maps a WebRTC library or holds a UDP socket, and the upstream
 * stores the camera's own frame rate. The SDK ends the customer's stream on any socket close or
 * failed keepalive, so neither a rolling deploy nor a crash may close anything:
 * - a rolling deploy (each old replica replaced: new one counted up by the balancer, then SIGTERM to
 *   the old) hands the stream over like a native one; the SDK reports no error, its results keep
 *   coming with no stretch of the stream's schedule over max(2 intervals, 2 s) without one (ticks
 *   read from the result ids, not arrival times a loaded machine stretches); the old replicas
 *   exit by themselves unless they hold the SDK's socket (that one exits once the SDK stopped);
 * - SIGKILL of the replica that owns the stream (not the one holding its socket): a survivor adopts
 *   it, the results go on, the SDK sees nothing.
 * The emulator's synthetic publisher is off: every frame upstream came from the camera.
 */
import http from 'node:http';
import path from 'node:path';
import express from 'express';
import type { Page } from 'playwright-core';
import { closeServer, listen } from '../../src/lib/listen';
import { longestTickGap } from '../helpers/fleet';
import { replaceReplica } from '../helpers/rolling';
import type { ReplacedReplica } from '../helpers/rolling';
import { deadline, ownerOf, slotsOfKey, until, useFleet } from '../gateway/fleet/fleet-test';
import { startHaproxy } from '../helpers/haproxy';
import type { Balancer } from '../helpers/haproxy';
import { mediaLibrariesMapped, udpSockets } from '../helpers/process-footprint';
import { bundleScript, launchBrowser, servePage } from './helpers';
import type { TestBrowser } from './helpers';
import { sleep } from '../helpers/time';

/** The provider's profile (config/overshoot.json) as its documented environment. */
const PROFILE = { BRAND: 'overshoot', BRAND_ABBREVIATION: 'ovs', THIRDPARTY_BACKEND: 'gemini', ROOM_VENDOR: 'livekit' };
const KEY = 'ovs-local-dev';
/** The SDK's `delay_seconds`: one result per interval. */
const INTERVAL_S = 0.5;
const GAP_BOUND_MS = Math.max(2 * INTERVAL_S * 1000, 2000);

// A readiness delay, as behind any balancer (production's default is 5 s): a replica holding none
// of the SDK's connections would otherwise exit before HAProxy's next check (200 ms), and a
// keepalive routed to it meanwhile fails, which the SDK treats as fatal.
const fleet = useFleet({
  env: { ...PROFILE, LEGACY_LEASE_TTL_SECONDS: '10', SHUTDOWN_DELAY_MS: '1000' },
  emulatorEnv: PROFILE,
  publisher: false,
});
let lb: Balancer;
let browser: TestBrowser;
let pages: http.Server;
let pageUrl: string;

beforeAll(async () => {
  const [balancer, script, b] = await Promise.all([
    startHaproxy({ servers: fleet().replicas.map((r) => ({ name: r.id, url: r.url })) }),
    bundleScript(path.join(__dirname, 'pages/sdk-client.ts')),
    launchBrowser(['--use-fake-device-for-media-stream=fps=30']),
  ]);
  lb = balancer;
  browser = b;
  const app = express();
  servePage(app, '/sdk', script);
  pages = http.createServer(app);
  pageUrl = `http://127.0.0.1:${await listen(pages, 0, '127.0.0.1')}/sdk`;
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await lb?.stop();
  if (pages) await closeServer(pages);
});

type Results = [string, number, string][];

/** The SDK's own console lines (its close warnings name the close code). */
const sdkLog: string[] = [];

/** Resolves once the page has `n` results in all; fails at once with the SDK's errors if it reports any. */
async function sdkResults(page: Page, n: number, what = ''): Promise<Results> {
  for (;;) {
    const { results, errors } = await page.evaluate(() => ({ results: window.sdkTest.results, errors: window.sdkTest.errors }));
    if (errors.length) {
      const ended = fleet().replicas.flatMap((r) =>
        r.lines.filter((l) => l.msg === 'legacy stream ended').map((l) => `${r.id}: ${String(l.reason)}`),
      );
      throw new Error(
        `${what}: the SDK reported ${errors.join('; ')} (SDK log: ${sdkLog.join(' | ')}; streams ended: ${ended.join(', ') || 'none logged'})`,
      );
    }
    if (results.length >= n) return results;
    await sleep(100);
  }
}

/** Results sockets a replica holds now (its `gateway_ws_connections` gauge). */
async function socketsOn(url: string): Promise<number> {
  const text = await fetch(`${url}/metrics`).then((r) => r.text());
  return Number(/^gateway_ws_connections (\d+)/m.exec(text)?.[1] ?? 0);
}

/**
 * The camera reaches the room without the gateway: no running replica maps a WebRTC library or
 * holds a UDP socket, and the upstream stores what the SDK sends (not a sampled rate).
 */
async function expectNoMediaInReplicas(page: Page, id: string): Promise<void> {
  for (const r of fleet().replicas.filter((x) => x.running())) {
    const pid = r.proc.child.pid!;
    expect({ replica: r.id, libraries: mediaLibrariesMapped(pid), udp: udpSockets(pid) }).toEqual({ replica: r.id, libraries: [], udp: 0 });
  }
  const stored = async () => (await fleet().upstreamStreams()).find((u) => u.id === id)?.last_frame_index ?? 0;
  const sentNow = () => page.evaluate(() => window.sdkTest.framesSent());
  // Counted, not timed: of 30 more frames the SDK sends, the upstream comes to store at least 80 %.
  const [sent0, stored0] = [await sentNow(), await stored()];
  await deadline(
    until(async () => (await sentNow()) - sent0 >= 30),
    30_000,
    'the SDK sends 30 frames',
  );
  const sent = (await sentNow()) - sent0;
  await deadline(
    until(async () => (await stored()) - stored0 >= Math.floor(0.8 * sent)),
    30_000,
    'the upstream stores them',
  );
  console.log(`SDK over WHIP: the SDK sent ${sent} frames, the upstream stored ${(await stored()) - stored0} by then`);
}

const longestGap = (results: Results) => results.slice(1).reduce((gap, r, i) => Math.max(gap, r[1] - results[i]![1]), 0);

test('the browser SDK streams through a rolling deploy of three replicas: no error, no gap, old replicas exit once the SDK is gone', async () => {
  const page = await browser.newPage();
  page.on('console', (m) => void (m.text().includes('[RealtimeVision]') && sdkLog.push(m.text())));
  try {
    await page.goto(pageUrl);
    const started = await page.evaluate(
      ([apiUrl, apiKey, delay]) =>
        window.sdkTest.start({
          apiUrl,
          apiKey,
          prompt: 'What happens?',
          model: 'local/analyzer-mini',
          processing: { clip_length_seconds: 1, delay_seconds: delay },
        }),
      [`${lb.url}/v0.2`, KEY, INTERVAL_S] as const,
    );
    expect(started.error).toBeUndefined();
    const id = started.streamId!;
    await deadline(sdkResults(page, 3), 30_000, 'first SDK results');

    // Where the SDK's socket landed (the stream itself moves with every replaced replica).
    const socketOn: string[] = [];
    for (const r of fleet().replicas) if ((await socketsOn(r.url)) > 0) socketOn.push(r.id);
    expect(socketOn).toHaveLength(1);
    const holders = new Set([socketOn[0]!]);
    await expectNoMediaInReplicas(page, id);

    const steps: ReplacedReplica[] = [];
    for (const [old, next] of [
      ['A', 'D'],
      ['B', 'E'],
      ['C', 'F'],
    ] as const) {
      steps.push(await replaceReplica(fleet(), lb, old, next));
      const what = `after the SIGTERM of ${old} (socket on ${socketOn[0]})`;
      await deadline(sdkResults(page, (await sdkResults(page, 0, what)).length + 3, what), 30_000, `SDK results ${what}`);
    }

    // A keepalive is due every 5 s (lease 10 s): at least one went through the deploy.
    const before = (await fleet().upstreamStreams()).find((u) => u.id === id);
    const results = await deadline(sdkResults(page, (await sdkResults(page, 0)).length + 4), 30_000, 'SDK results after the deploy');
    const after = (await fleet().upstreamStreams()).find((u) => u.id === id);
    expect(await page.evaluate(() => window.sdkTest.errors)).toEqual([]);
    expect(await page.evaluate(() => window.sdkTest.active())).toBe(true);
    expect(
      longestTickGap(
        results.map((r) => r[0]),
        id,
      ) *
        INTERVAL_S *
        1000,
    ).toBeLessThanOrEqual(GAP_BOUND_MS);
    console.log(
      `SDK through the deploy: longest time between two results ${longestGap(results)} ms (this machine's load included; not asserted)`,
    );
    expect(new Set(results.map((r) => r[0])).size).toBe(results.length);
    // Still active upstream, and the camera still arrives in the room.
    expect(before?.state).toBe('active');
    expect(after?.state).toBe('active');
    expect(after!.last_frame_index!).toBeGreaterThan(before!.last_frame_index!);
    expect((await fleet().session(id))?.state).toBe('active');

    // Old replicas the SDK does not use exit on their own; those it uses wait for it.
    for (const step of steps.filter((s) => !holders.has(s.old.id))) {
      expect(await deadline(step.exit, 30_000, `${step.old.id} (no SDK connection) exits`)).toMatchObject({ code: 0 });
    }
    const held = steps.filter((s) => holders.has(s.old.id));
    for (const step of held) expect(step.exited()).toBeUndefined();

    const stoppedAt = Date.now();
    await page.evaluate(() => window.sdkTest.stop());
    for (const step of held) {
      const exit = await deadline(step.exit, 60_000, `${step.old.id} exits once the SDK stopped`);
      expect(exit.code).toBe(0);
      expect(exit.atMs).toBeGreaterThanOrEqual(stoppedAt);
    }
    // 0.1.x never DELETEs: the stream ends when its owner sees the camera's frames stop upstream
    // (legacy.webrtc.framesLostMs, 10 s), or at the lease (10 s here).
    await deadline(
      until(async () => (await fleet().session(id))?.state === 'ended'),
      60_000,
      'the stream ends after the SDK stopped',
    );
    expect(['webrtc_disconnected', 'lease_expired']).toContain((await fleet().session(id))?.endReason);
    await deadline(
      until(async () => (await slotsOfKey(fleet(), KEY)) === 0),
      30_000,
      'the slot is released',
    );
    // The end's winner frees the slot first, then deletes the upstream stream.
    await deadline(
      until(async () => !(await fleet().upstreamStreams()).some((u) => u.id === id)),
      30_000,
      'the upstream stream deleted',
    );
    expect(await page.evaluate(() => window.sdkTest.errors)).toEqual([]);
  } finally {
    await page.close();
  }
}, 300_000);

test('SIGKILL of the replica that owns the SDK stream (another holds its socket): a survivor adopts it, no SDK error, its results go on', async () => {
  const page = await browser.newPage();
  page.on('console', (m) => void (m.text().includes('[RealtimeVision]') && sdkLog.push(m.text())));
  try {
    let id = '';
    let owner = '';
    // The balancer decides where the create and the socket land; only an owner that is not the
    // socket's replica can die without closing the SDK's socket (round robin separates them).
    for (let attempt = 1; ; attempt++) {
      await page.goto(pageUrl);
      const started = await page.evaluate(
        ([apiUrl, apiKey, delay]) =>
          window.sdkTest.start({
            apiUrl,
            apiKey,
            prompt: 'What happens?',
            model: 'local/analyzer-mini',
            processing: { clip_length_seconds: 1, delay_seconds: delay },
          }),
        [`${lb.url}/v0.2`, KEY, INTERVAL_S] as const,
      );
      expect(started.error).toBeUndefined();
      id = started.streamId!;
      await deadline(sdkResults(page, 3), 30_000, 'first SDK results');
      owner = await ownerOf(fleet(), id);
      const socketOn: string[] = [];
      for (const r of fleet().replicas.filter((x) => x.running())) if ((await socketsOn(r.url)) > 0) socketOn.push(r.id);
      expect(socketOn).toHaveLength(1);
      if (socketOn[0] !== owner) break;
      if (attempt === 3) throw new Error(`the balancer put the create and the socket on ${owner} three times`);
      await page.evaluate(() => window.sdkTest.stop());
    }
    await expectNoMediaInReplicas(page, id);

    const before = (await sdkResults(page, 0)).length;
    fleet().replica(owner).kill('SIGKILL');
    const results = await deadline(sdkResults(page, before + 4, `after the SIGKILL of ${owner}`), 60_000, 'SDK results after the SIGKILL');
    const adopter = await ownerOf(fleet(), id);
    expect(adopter).not.toBe(owner);
    expect(await page.evaluate(() => window.sdkTest.errors)).toEqual([]);
    expect(await page.evaluate(() => window.sdkTest.active())).toBe(true);
    expect(new Set(results.map((r) => r[0])).size).toBe(results.length);
    // The camera still arrives in the room, straight from the SDK's peer connection.
    await expectNoMediaInReplicas(page, id);

    await page.evaluate(() => window.sdkTest.stop());
    await deadline(
      until(async () => (await fleet().session(id))?.state === 'ended'),
      60_000,
      'the stream ends after the SDK stopped',
    );
    expect(['webrtc_disconnected', 'lease_expired']).toContain((await fleet().session(id))?.endReason);
    expect(await page.evaluate(() => window.sdkTest.errors)).toEqual([]);
  } finally {
    await page.close();
  }
}, 300_000);

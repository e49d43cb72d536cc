/**
 * The conformance kit against the real emulator (the default profile, its synthetic publisher
 * giving the frames) and against test doubles in front of it that each break one assumption: the
 * kit passes the first, fails the others naming the check, and deletes its stream on every path.
 */
import { brandOf } from '../../src/brand';
import { loadConfig } from '../../src/config';
import type { Config } from '../../src/config';
import { CHECK_IDS } from '../../src/conformance/checks';
import { formatReport } from '../../src/conformance/report';
import { MAX_COMPLETIONS } from '../../src/conformance/cost';
import { runConformance } from '../../src/conformance/run';
import type { ConformanceOptions, ConformanceReport } from '../../src/conformance/run';
import { startEmulator } from '../../src/emulator/server';
import type { RunningEmulator } from '../../src/emulator/server';
import { createLogger } from '../../src/lib/logger';
import { editJson, startDouble } from './double';
import type { Double, Rewrite } from './double';
import { TEST_PUBLISHER, testConfig } from '../helpers/config';

const KEY = 'svc-local-dev';
let cfg: Config;
let emu: RunningEmulator;
const doubles: Double[] = [];

beforeAll(async () => {
  cfg = testConfig({ emulator: { autoPublish: TEST_PUBLISHER } });
  emu = await startEmulator(cfg, createLogger('silent'));
});

afterAll(async () => {
  for (const d of doubles) await d.close();
  await emu?.close();
});

/** The frames come from the emulator's synthetic publisher (no rtc-node in this process). */
function run(upstreamUrl: string, over: Partial<ConformanceOptions> = {}): Promise<ConformanceReport> {
  return runConformance({ upstreamUrl, apiKey: KEY, brand: brandOf(cfg), publish: 'never', frameTimeoutMs: 120_000, ...over });
}

async function through(rewrite: Rewrite): Promise<string> {
  const d = await startDouble(emu.url, rewrite);
  doubles.push(d);
  return d.url;
}

const outcomes = (r: ConformanceReport) => Object.fromEntries(r.results.map((x) => [x.id, x.outcome]));

/** The stream the run created is ended by an explicit delete in the emulator. */
function expectDeleted(r: ConformanceReport): void {
  expect(r.streamId).toBeDefined();
  expect(r.streamDeleted).toBe(true);
  const s = emu.emulator.ctx.streams.get(r.streamId!);
  expect(s?.state).toBe('ended');
  expect(emu.emulator.ctx.streams.view(s!).end_reason).toBe('deleted');
}

/** Every check passed. */
function expectConformant(r: ConformanceReport): void {
  expect(r.results.filter((x) => x.outcome !== 'pass')).toEqual([]);
  expect(r.ok).toBe(true);
}

test('passes against the emulator: every check runs, one stream, bounded completions, stream deleted', async () => {
  const r = await run(emu.url);
  expectConformant(r);
  expect(r.results.map((x) => x.id)).toEqual(CHECK_IDS);
  expect(r.model).toBe('local/analyzer');
  expect(r.completions).toBeGreaterThan(0);
  expect(r.completions).toBeLessThanOrEqual(MAX_COMPLETIONS);
  expect(r.estimate!.microcents).toBeGreaterThan(0);
  expect(r.spentMicrocents).toBeGreaterThan(0);
  expect(r.spentMicrocents).toBeLessThanOrEqual(r.estimate!.microcents);
  // The emulator bills what the kit priced from /billing/pricing.
  expect(r.balanceBeforeMicrocents! - r.balanceAfterMicrocents!).toBe(r.spentMicrocents);
  expectDeleted(r);
  expect(emu.emulator.ctx.streams.active()).toEqual([]);
  const text = formatReport(r);
  expect(text).toMatch(/^pass +completion\.sse +api-reference\/chat-completions\.mdx/m);
  expect(text).toMatch(/^pass +region\.wrong +api-reference\/regions\.mdx/m);
  // The contract's reading of the statuses where the provider's pages differ, named in the report.
  expect(r.results.find((x) => x.id === 'reference.future-frame')!.detail).toBe(
    'HTTP 422 frame_not_yet_produced; reading: the contract (422)',
  );
  expect(r.results.find((x) => x.id === 'reference.repeated-key')!.detail).toBe('HTTP 422; reading: the contract (422)');
  expect(r.results.find((x) => x.id === 'room.whip')!.detail).toMatch(
    /^answer with [1-9]\d* candidates, 0 ICE servers, ETag; session deleted$/,
  );
}, 180_000);

test('a create response without ttl_seconds fails stream.create alone; the stream is still deleted', async () => {
  const url = await through(
    editJson(
      (ex) => ex.method === 'POST' && ex.path === '/v1beta/streams' && ex.status === 201,
      (b) => delete b.ttl_seconds,
    ),
  );
  const r = await run(url);
  const failed = r.results.filter((x) => x.outcome === 'fail');
  expect(failed).toEqual([{ id: 'stream.create', outcome: 'fail', detail: 'ttl_seconds should be int, got nothing' }]);
  expect(r.ok).toBe(false);
  expect(outcomes(r)['completion.clip']).toBe('pass');
  expectDeleted(r);
  expect(formatReport(r)).toMatch(/^NOT CONFORMANT: stream\.create/m);
}, 180_000);

test('an SSE answer without data: [DONE] fails completion.sse; the stream is deleted', async () => {
  const url = await through((ex) =>
    ex.path === '/v1beta/chat/completions' && ex.headers['content-type']?.startsWith('text/event-stream')
      ? { ...ex, body: ex.body.replace('data: [DONE]\n\n', '') }
      : ex,
  );
  const r = await run(url, { skip: ['viewer-token'] });
  expect(r.results.filter((x) => x.outcome === 'fail')).toEqual([
    { id: 'completion.sse', outcome: 'fail', detail: 'no data: [DONE] event' },
  ]);
  // A check skipped on request is reported so, never as passed.
  expect(outcomes(r)['viewer-token']).toBe('skip');
  expectDeleted(r);
}, 180_000);

test('a room without WHIP fails room.whip alone, naming the setting the gateway then needs; the passing run deleted its WHIP session', async () => {
  expect(emu.emulator.room.whipSessionCount).toBe(0);
  const bare = await startEmulator(
    testConfig({ emulator: { autoPublish: TEST_PUBLISHER, room: { whip: { enabled: false } } } }),
    createLogger('silent'),
  );
  try {
    const r = await run(bare.url);
    expect(r.results.filter((x) => x.outcome === 'fail')).toEqual([
      {
        id: 'room.whip',
        outcome: 'fail',
        detail: expect.stringMatching(
          /^POST http:\/\/127\.0\.0\.1:\d+\/whip\/v1: WHIP unsupported \(404\): .*legacy\.webrtc\.mode "relay"$/,
        ),
      },
    ]);
    expect(r.streamDeleted).toBe(true);
  } finally {
    await bare.close();
  }
}, 180_000);

test("an upstream answering with the provider's pages' statuses passes, and the report names that reading", async () => {
  const provider = await startEmulator(
    testConfig({ emulator: { autoPublish: TEST_PUBLISHER, dialect: 'provider' } }),
    createLogger('silent'),
  );
  try {
    const r = await run(provider.url);
    expectConformant(r);
    expect(r.results.find((x) => x.id === 'reference.future-frame')!.detail).toBe(
      "HTTP 409 frame_not_yet_produced; reading: the provider's pages (409)",
    );
    expect(r.results.find((x) => x.id === 'reference.repeated-key')!.detail).toBe(
      "HTTP 400 query_param_invalid; reading: the provider's pages (400)",
    );
  } finally {
    await provider.close();
  }
}, 180_000);

test('a 401 whose body the gateway cannot read fails key.wrong', async () => {
  const url = await through((ex) => (ex.status === 401 ? { ...ex, headers: { 'content-type': 'application/json' }, body: '{}' } : ex));
  const r = await run(url);
  expect(r.results.filter((x) => x.outcome === 'fail').map((x) => x.id)).toEqual(['key.wrong']);
  expect(r.results.find((x) => x.id === 'key.wrong')!.detail).toMatch(/the 401 body has no message the gateway reads/);
  expectDeleted(r);
}, 180_000);

test('interrupted once its stream exists: the stream is deleted and the rest is skipped', async () => {
  const abort = new AbortController();
  const r = await run(emu.url, {
    signal: abort.signal,
    onProgress: (line) => {
      if (/^stream \S+ created$/.test(line)) abort.abort(new Error('test interrupt'));
    },
  });
  expect(r.interrupted).toBe(true);
  expect(r.ok).toBe(false);
  expect(outcomes(r)['completion.clip']).toBe('skip');
  expect(r.results.find((x) => x.id === 'stream.delete')!.detail).toBe('interrupted');
  expectDeleted(r);
  expect(formatReport(r)).toMatch(/^INTERRUPTED/m);
}, 180_000);

test('passes against an emulator on the provider profile (ovs- key, ovs:// references, overshoot field and header)', async () => {
  const profile = loadConfig({
    env: {},
    file: 'config/overshoot.json',
    overrides: { logLevel: 'silent', emulator: { port: 0, autoPublish: TEST_PUBLISHER } },
  });
  const ovs = await startEmulator(profile, createLogger('silent'));
  try {
    const r = await runConformance({
      upstreamUrl: ovs.url,
      apiKey: 'ovs-local-dev',
      brand: brandOf(profile),
      publish: 'never',
      frameTimeoutMs: 120_000,
    });
    expectConformant(r);
    expect(r.results.map((x) => x.id)).toEqual(CHECK_IDS);
    // The seed profile's brand against it fails where the tokens differ, naming the check.
    const wrong = await runConformance({
      upstreamUrl: ovs.url,
      apiKey: 'ovs-local-dev',
      brand: brandOf(cfg),
      publish: 'never',
      frameTimeoutMs: 120_000,
    });
    expect(wrong.ok).toBe(false);
    expect(wrong.results.find((x) => x.id === 'key.prefix')!.outcome).toBe('fail');
  } finally {
    await ovs.close();
  }
}, 240_000);

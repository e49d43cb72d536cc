/**
 * LegacyStreams on fake time: the real emulator and upstream client answer, but every lease,
 * keepalive, first-frame poll, tick and tick deadline of the streams runs on a FakeClock the test
 * moves, and only while no upstream call is running (an answer takes no fake time, however slow).
 * Outcomes are read from events (results published, streams ended), never from elapsed time.
 */
import { deadline, until } from '../../helpers/time';
import { brandOf } from '../../../src/brand';
import type { Config } from '../../../src/config';
import { startEmulator } from '../../../src/emulator/server';
import type { RunningEmulator } from '../../../src/emulator/server';
import { UpstreamCatalog } from '../../../src/gateway/legacy/streams/catalog';
import { createLegacySchemas } from '../../../src/gateway/legacy/contract/schema';
import type { LegacyStreams } from '../../../src/gateway/legacy/streams/legacy-streams';
import { normalizeCreate } from '../../../src/gateway/legacy/contract/spec';
import type { LegacyResultMessage } from '../../../src/gateway/legacy/contract/responses';
import { parseLegacy } from '../../../src/gateway/legacy/contract/validate';
import type { Store } from '../../../src/gateway/store/store';
import { createLogger } from '../../../src/lib/logger';
import type { UpstreamClient } from '../../../src/upstream/client';
import { UpstreamError } from '../../../src/upstream/client';
import { ModelLatency } from '../../../src/emulator/models/latency';
import { resultId, resultsChannel } from '../../../src/gateway/legacy/streams/results-channel';
import { driveUntil, quiesce, settle } from '../../helpers/fake-clock';
import type { FakeClock } from '../../helpers/fake-clock';
import { fakeClockStreams } from '../../helpers/fake-clock-streams';
import { KEY, frameBody, http } from '../../helpers/stack';
import { TEST_PUBLISHER, testConfig } from '../../helpers/config';
import { SOLO_LINK } from '../../../src/gateway/fleet/member';

const POLL_MS = 50;
const INTERVAL_MS = 500;

interface Rig {
  cfg: Config;
  clock: FakeClock;
  store: Store;
  streams: LegacyStreams;
  upstream: UpstreamClient;
  ended: string[];
  upstreamErrors: number[];
  rateLimited: string[];
  /** No upstream call is running. */
  idle(): boolean;
  close(): Promise<void>;
}

let emulator: RunningEmulator;
let baseCfg: Config;

beforeAll(async () => {
  baseCfg = testConfig({ emulator: { autoPublish: TEST_PUBLISHER } });
  emulator = await startEmulator(baseCfg, createLogger(baseCfg.logLevel));
});
afterAll(async () => {
  await emulator.close();
});
afterEach(async () => {
  await http(emulator.url, 'DELETE', '/_emulator/faults');
});

function rig(legacy: Record<string, unknown> = {}): Rig {
  const cfg: Config = { ...baseCfg, legacy: { ...baseCfg.legacy, firstFramePollMs: POLL_MS, ...legacy } };
  const parts = fakeClockStreams(emulator.url, cfg);
  const ended: string[] = [];
  const upstreamErrors: number[] = [];
  const rateLimited: string[] = [];
  const streams = parts.streams({
    fleet: SOLO_LINK,
    observer: {
      streamEnded: (_k, reason) => void ended.push(reason),
      upstreamError: (status) => void upstreamErrors.push(status),
      rateLimited: (event) => void rateLimited.push(event),
    },
  });
  return {
    cfg,
    clock: parts.clock,
    store: parts.store,
    streams,
    upstream: parts.upstream,
    ended,
    upstreamErrors,
    rateLimited,
    idle: parts.idle,
    async close() {
      await streams.closeAll();
      await parts.close();
    },
  };
}

async function create(r: Rig, intervalMs = INTERVAL_MS): Promise<string> {
  const parsed = parseLegacy(createLegacySchemas(brandOf(r.cfg)).createStream, frameBody({ interval_seconds: intervalMs / 1000 }), 'req');
  const spec = normalizeCreate(parsed, { maxTokensPerSecond: r.cfg.legacy.maxTokensPerSecond });
  const accountId = await new UpstreamCatalog(r.upstream, { modelsCacheMs: 0, accountCacheMs: 0 }).accountOf(KEY);
  return (await r.streams.create({ apiKey: KEY, accountId, spec })).streamId;
}

/** Results published for a stream, in order. */
function results(r: Rig, streamId: string): LegacyResultMessage[] {
  const out: LegacyResultMessage[] = [];
  r.store.subscribe(resultsChannel(streamId), (msg) => {
    if (msg.startsWith('r')) out.push(JSON.parse(msg.slice(1)) as LegacyResultMessage);
  });
  return out;
}

/**
 * Moves fake time a first-frame poll at a time, each step once no upstream call is running, until
 * `done` holds. Fails instead of hanging.
 */
const drive = (r: Rig, done: () => boolean) => driveUntil(r.clock, done, { stepMs: POLL_MS, maxSteps: 400, idle: r.idle });

/** Waits (real time, for the emulator's answers) until `done` holds; fails instead of hanging. */
const waitFor = (done: () => boolean) => deadline(until(done, 5), 10_000, 'the upstream answered');

/** Lets upstream calls in flight finish, and what they set off (no fake time passes). */
async function quiet(r: Rig): Promise<void> {
  await quiesce(r.idle);
  for (let i = 0; i < 10; i++) await settle();
  await quiesce(r.idle);
}

const fault = (body: Record<string, unknown>) => http(emulator.url, 'POST', '/_emulator/faults', { body });

describe('LegacyStreams on fake time', () => {
  test('ticks publish ok results once the first frame is in, one per interval of (fake) time', async () => {
    const r = rig();
    const id = await create(r);
    const seen = results(r, id);
    await drive(r, () => seen.length >= 1);
    await quiet(r);
    const n = seen.length;
    for (let i = 1; i <= 4; i++) {
      r.clock.advance(INTERVAL_MS);
      await waitFor(() => seen.length === n + i);
    }
    // Without time passing, no tick runs.
    await quiet(r);
    expect(seen).toHaveLength(n + 4);
    expect(seen.every((m) => m.ok && m.stream_id === id)).toBe(true);
    expect(r.ended).toEqual([]);
    await r.close();
  });

  test('an upstream 402 on a tick ends the stream insufficient_credits', async () => {
    const r = rig();
    const id = await create(r);
    await fault({ model: '*', count: 5, status: 402, code: 'insufficient_credits' });
    await drive(r, () => r.ended.length > 0);
    expect(r.ended).toEqual(['insufficient_credits']);
    expect(await r.store.getRecord(id)).toMatchObject({ state: 'ended', endReason: 'insufficient_credits' });
    await r.close();
  });

  test('an upstream stream gone (404) ends the legacy stream with the upstream reason', async () => {
    const r = rig();
    const id = await create(r);
    const seen = results(r, id);
    await drive(r, () => seen.length >= 1);
    await http(emulator.url, 'POST', `/_emulator/streams/${id}/expire`);
    await drive(r, () => r.ended.length > 0);
    expect(r.ended).toEqual(['lease_expired']);
    // The upstream stream is already gone: nothing is left to delete at shutdown.
    expect(r.streams.undeletedUpstreamStreams).toEqual([]);
    await r.close();
  });

  test.each([
    [409, 'frame_not_yet_produced'],
    [422, 'frame_not_yet_produced'],
    [410, 'frame_evicted'],
    [422, 'frame_evicted'],
    [400, 'query_param_invalid'],
  ])(
    "a tick that meets %i %s (either reading of the provider's statuses) gives one error result; the stream goes on",
    async (status, code) => {
      const r = rig();
      const id = await create(r);
      const seen = results(r, id);
      await fault({ model: '*', count: 1, status, code });
      await drive(r, () => seen.length >= 2);
      expect(r.upstreamErrors).toEqual([status]);
      expect(seen[0]).toMatchObject({
        ok: false,
        error: `upstream_error (502) [${code}]: the service failed to run the inference; retry later`,
      });
      expect(seen[1]).toMatchObject({ ok: true, error: null });
      expect(r.ended).toEqual([]);
      await r.close();
    },
  );

  test('the requested model failing falls back to the configured model', async () => {
    const r = rig({ fallbackModels: ['local/analyzer-mini'] });
    const id = await create(r);
    const seen = results(r, id);
    await fault({ model: 'local/analyzer', count: 3, status: 503 });
    await drive(r, () => seen.length >= 1);
    expect(seen[0]).toMatchObject({ ok: true, model_name: 'local/analyzer-mini' });
    await r.close();
  });

  test('keepalive reports the cost of the ticks since the last one and the fake seconds passed', async () => {
    const r = rig();
    const id = await create(r);
    const seen = results(r, id);
    await drive(r, () => seen.length >= 2);
    r.clock.advance(7_000);
    const rec = (await r.store.getRecord(id))!;
    const ka = await r.streams.keepalive(id, KEY, rec.accountId);
    expect(ka.costCents).toBeGreaterThan(0);
    expect(ka.secondsCharged).toBe(Math.round((r.clock.now() - rec.createdAtMs) / 1000));
    // The cost was handed out: the next keepalive at once reports none and no seconds.
    const again = await r.streams.keepalive(id, KEY, rec.accountId);
    expect(again).toMatchObject({ costCents: 0, secondsCharged: 0 });
    await r.close();
  });

  test('a slot the store lost (a Redis failover) is put back, bound, at the stream’s next keepalive', async () => {
    const r = rig();
    const id = await create(r);
    const rec = (await r.store.getRecord(id))!;
    expect(await r.store.releaseSlot(rec.keyHash, rec.slotId)).toBe(true);
    expect(await r.store.slotHolders(rec.keyHash)).toEqual([]);
    await r.streams.keepalive(id, KEY, rec.accountId);
    expect(await r.store.slotHolders(rec.keyHash)).toEqual([expect.objectContaining({ slotId: rec.slotId, streamId: id })]);
    await r.close();
  });

  test('the lease expires exactly at its time; a keepalive before it moves it', async () => {
    const r = rig({ leaseTtlSeconds: 45 });
    const id = await create(r);
    const accountId = (await r.store.getRecord(id))!.accountId;
    r.clock.advance(30_000);
    await r.streams.keepalive(id, KEY, accountId);
    // 45 s after create but only 15 s after the keepalive: still alive.
    r.clock.advance(15_000);
    await settle();
    expect(r.ended).toEqual([]);
    // 45 s after the keepalive: ended lease_expired.
    r.clock.advance(30_000);
    for (let i = 0; i < 20 && r.ended.length === 0; i++) await settle();
    expect(r.ended).toEqual(['lease_expired']);
    expect(await r.store.getRecord(id)).toMatchObject({ state: 'ended', endReason: 'lease_expired' });
    await r.close();
  });

  test('a keepalive refused for credits (402) leaves the stream running; a top-up renews it; else it lapses insufficient_credits', async () => {
    // One tick a minute: after tick 0 nothing asks the upstream for a completion (or a keepalive,
    // every 60 s) within the 45 s lease, so only the lease can end the stream.
    const r = rig({ leaseTtlSeconds: 45 });
    const setBalance = (balance_microcents: number) =>
      http(emulator.url, 'POST', '/_emulator/balance', { body: { api_key: KEY, balance_microcents } });
    try {
      const id = await create(r, 60_000);
      const seen = results(r, id);
      await drive(r, () => seen.length >= 1);
      await quiet(r);
      const accountId = (await r.store.getRecord(id))!.accountId;
      await setBalance(0);
      r.clock.advance(10_000);
      const lease = (await r.store.getRecord(id))!.leaseExpiresAtMs;
      await expect(r.streams.keepalive(id, KEY, accountId)).rejects.toMatchObject({ status: 402, code: 'insufficient_credits' });
      // Not renewed, not ended.
      expect(await r.store.getRecord(id)).toMatchObject({ state: 'active', leaseExpiresAtMs: lease, creditsRefusedAtMs: r.clock.now() });
      expect(r.ended).toEqual([]);

      await setBalance(1_000_000_000);
      const ka = await r.streams.keepalive(id, KEY, accountId);
      expect(ka.creditsRemainingCents).toBeGreaterThan(0);
      expect(await r.store.getRecord(id)).toMatchObject({
        state: 'active',
        leaseExpiresAtMs: r.clock.now() + 45_000,
        creditsRefusedAtMs: null,
      });

      await setBalance(0);
      await expect(r.streams.keepalive(id, KEY, accountId)).rejects.toMatchObject({ status: 402 });
      r.clock.advance(45_000);
      for (let i = 0; i < 20 && r.ended.length === 0; i++) await settle();
      expect(r.ended).toEqual(['insufficient_credits']);
      expect(await r.store.getRecord(id)).toMatchObject({ state: 'ended', endReason: 'insufficient_credits' });
      expect(seen).toHaveLength(1);
    } finally {
      await setBalance(1_000_000_000);
      await r.close();
    }
  });

  test('an upstream 429 holds the key back for its retry-after: ticks inside it are skipped, none queued, the stream goes on', async () => {
    const r = rig();
    const id = await create(r);
    const seen = results(r, id);
    await drive(r, () => seen.length >= 1);
    await quiet(r);
    await fault({ model: '*', count: 1, status: 429, code: 'rate_limited', retryAfterSeconds: 3 });
    // The next tick meets the 429 and says so in its result.
    r.clock.advance(INTERVAL_MS);
    await waitFor(() => seen.length === 2);
    expect(seen[1]).toMatchObject({ ok: false });
    expect(seen[1]!.error).toMatch(/^upstream_unavailable \(503\)/);
    expect(r.rateLimited).toEqual(['limited']);
    // The 3 s that follow: every tick skipped, nothing asked upstream, nothing published.
    for (let t = INTERVAL_MS; t < 3000; t += INTERVAL_MS) {
      r.clock.advance(INTERVAL_MS);
      await quiet(r);
    }
    expect(seen).toHaveLength(2);
    expect(r.rateLimited.filter((e) => e === 'tick_skipped').length).toBeGreaterThanOrEqual(4);
    // After the hold (and this stream's share of the spread), ticks answer again; nothing ended.
    for (let i = 0; i < 4; i++) {
      r.clock.advance(INTERVAL_MS);
      await quiet(r);
    }
    await waitFor(() => seen.length >= 3);
    expect(seen.slice(2).every((m) => m.ok)).toBe(true);
    expect(r.ended).toEqual([]);
    expect(r.upstreamErrors).toEqual([429]);
    await r.close();
  });
});

/** A hosted model's answer times (median 700 ms, p99 2.8 s, +20 ms for the one frame), seeded. */
const HOSTED = { medianMs: 700, p99Ms: 2800, perFrameMs: 20 };

/**
 * Every completion of the rig first takes `latencyMs()` of fake time (aborted with its tick), as a
 * hosted model would, then asks the emulator; reads the most completions in flight at once and
 * when (fake time) each was asked.
 */
function slowCompletions(r: Rig, latencyMs: () => number): { maxInFlight(): number; askedAt: number[] } {
  const real = r.upstream.chatCompletion.bind(r.upstream);
  let inFlight = 0;
  let max = 0;
  const askedAt: number[] = [];
  r.upstream.chatCompletion = async (apiKey, request, opts = {}) => {
    askedAt.push(r.clock.now());
    max = Math.max(max, ++inFlight);
    try {
      await new Promise<void>((resolve, reject) => {
        const signal = opts.signal;
        if (signal?.aborted) return reject(signal.reason);
        const timer = r.clock.setTimeout(resolve, latencyMs());
        signal?.addEventListener('abort', () => (r.clock.clearTimeout(timer), reject(signal.reason)), { once: true });
      });
      return await real(apiKey, request, opts);
    } finally {
      inFlight--;
    }
  };
  return { maxInFlight: () => max, askedAt };
}

/** Results of a stream with the fake time each was published at and its tick number (from its id). */
function timedResults(r: Rig, streamId: string): { at: number; tick: number; message: LegacyResultMessage }[] {
  const out: { at: number; tick: number; message: LegacyResultMessage }[] = [];
  r.store.subscribe(resultsChannel(streamId), (msg) => {
    if (!msg.startsWith('r')) return;
    const message = JSON.parse(msg.slice(1)) as LegacyResultMessage;
    let tick = 0;
    while (resultId(streamId, tick) !== message.id && tick < 10_000) tick++;
    out.push({ at: r.clock.now(), tick, message });
  });
  return out;
}

/** Moves fake time to `untilMs` in steps of `stepMs`, each once no upstream call runs. */
async function runTo(r: Rig, untilMs: number, stepMs = 50): Promise<void> {
  while (r.clock.now() < untilMs) {
    await quiesce(r.idle);
    r.clock.advance(Math.min(stepMs, untilMs - r.clock.now()));
    for (let i = 0; i < 10; i++) await settle();
  }
  await quiet(r);
}

describe('the cadence a customer asked for, at a hosted model’s latency (fake time)', () => {
  test('a 1 s frame stream at median 700 ms / p99 2.8 s gets ≥ 10 results of the 12 ticks due in 12 s, in tick order, ≤ 3 completions in flight; one at a time, the same answer times give fewer', async () => {
    const delivered: Record<number, number> = {};
    for (const maxInFlight of [3, 1]) {
      const r = rig({ maxInFlight });
      const latency = new ModelLatency(3);
      const slow = slowCompletions(r, () => latency.draw(HOSTED, 1));
      const id = await create(r, 1000);
      const seen = timedResults(r, id);
      await drive(r, () => slow.askedAt.length > 0);
      // The 12 ticks due in 12 s, each given its tick deadline (4 s) to answer.
      const firstDue = slow.askedAt[0]!;
      await runTo(r, firstDue + 16_000);
      delivered[maxInFlight] = seen.filter((s) => s.tick < 12).length;
      // In tick order, each tick at most once, whatever order the completions finished in.
      const ticks = seen.map((s) => s.tick);
      expect(ticks).toEqual([...new Set(ticks)].sort((a, b) => a - b));
      expect(slow.maxInFlight()).toBeLessThanOrEqual(maxInFlight);
      expect(r.ended).toEqual([]);
      await r.close();
    }
    expect(delivered[3]).toBeGreaterThanOrEqual(10);
    // The positive control: the same answer times, one completion at a time, lose ticks.
    expect(delivered[1]).toBeLessThan(delivered[3]!);
    console.log(`12 ticks due at median 700 ms / p99 2.8 s: ${delivered[3]} results with 3 in flight, ${delivered[1]} with 1`);
  });

  test('a 5 s completion does not reorder results: the ticks after it that finished first are published after it', async () => {
    const r = rig({ maxInFlight: 3 });
    const answerTimes = [5000, 300, 300, 300];
    const slow = slowCompletions(r, () => answerTimes.shift() ?? 300);
    // A 2 s interval: the tick may take 8 s (tickDeadlineIntervals 4), so the slow one answers.
    const id = await create(r, 2000);
    const seen = timedResults(r, id);
    await drive(r, () => slow.askedAt.length > 0);
    const firstDue = slow.askedAt[0]!;
    await runTo(r, firstDue + 8_000);
    expect(seen.map((s) => s.tick).slice(0, 4)).toEqual([0, 1, 2, 3]);
    expect(seen.slice(0, 4).every((s) => s.message.ok)).toBe(true);
    // Ticks 1 and 2 were answered at 2.3 s and 4.3 s, and held until tick 0's answer at 5 s.
    expect(seen[0]!.at - firstDue).toBe(5000);
    expect(seen[1]!.at).toBe(seen[0]!.at);
    expect(seen[2]!.at).toBe(seen[0]!.at);
    expect(seen[3]!.at - firstDue).toBe(6300);
    // Tick 0 and, at 4 s, tick 2 at the upstream (tick 1 answered and waiting): two at once.
    expect(slow.maxInFlight()).toBe(2);
    await r.close();
  });

  test('a completion that outlives its tick deadline gives its error result first; the later ones follow in order', async () => {
    const r = rig({ maxInFlight: 3 });
    const answerTimes = [9000, 300, 300, 300, 300, 300];
    const slow = slowCompletions(r, () => answerTimes.shift() ?? 300);
    const id = await create(r, 1000);
    const seen = timedResults(r, id);
    await drive(r, () => slow.askedAt.length > 0);
    await runTo(r, slow.askedAt[0]! + 7000);
    const ticks = seen.map((s) => s.tick);
    expect(ticks).toEqual([...new Set(ticks)].sort((a, b) => a - b));
    expect(seen[0]).toMatchObject({ tick: 0, message: { ok: false } });
    expect(seen[0]!.message.error).toMatch(/^upstream_timeout \(504\)/);
    expect(seen.slice(1).every((s) => s.message.ok)).toBe(true);
    await r.close();
  });
});

describe('the upstream lease, renewed from what the upstream says (fake time)', () => {
  test('a 30 s lease is renewed every 10 s, and 3 s after a failed renewal', async () => {
    const r = rig();
    // The upstream hands out 30 s leases (the contract does not fix their length).
    const create0 = r.upstream.createStream.bind(r.upstream);
    r.upstream.createStream = async (...args) => ({ ...(await create0(...args)), ttl_seconds: 30 });
    const keepalive0 = r.upstream.keepalive.bind(r.upstream);
    const renewals: number[] = [];
    r.upstream.keepalive = async (...args) => {
      renewals.push(r.clock.now());
      if (renewals.length === 2) throw new UpstreamError({ kind: 'network', status: 503, message: 'connection reset' });
      return { ...(await keepalive0(...args)), ttl_seconds: 30 };
    };
    const createdAt = r.clock.now();
    await create(r, 60_000);
    // Within the legacy lease (45 s: nobody keeps this stream alive on the legacy side).
    await runTo(r, createdAt + 44_000, 500);
    expect(renewals.map((t) => t - createdAt)).toEqual([10_000, 20_000, 23_000, 33_000, 43_000]);
    expect(r.ended).toEqual([]);
    await r.close();
  });
});

/**
 * ResultWindowRecorder on fake time with a scripted upstream stream read: the window is the stream
 * clock at the attempt's send time, from an anchor taken at the middle of the read's round trip;
 * one read per session however many results wait for it; a slow read is replaced by a better one
 * later; no window before the first frame or once the stream ended; `prepare` starts the read so
 * that the commit carries the window (`windowOf`).
 */
import { memoryStore } from '../../../src/gateway/store/memory';
import { ResultWindowRecorder } from '../../../src/gateway/legacy/streams/result-window';
import { LiveStream } from '../../../src/gateway/legacy/streams/live-stream';
import type { LegacyRecord, StreamsContext } from '../../../src/gateway/legacy/streams/ports';
import { createLogger } from '../../../src/lib/logger';
import type { Stream } from '../../../src/lib/wire';
import { FakeClock } from '../../helpers/fake-clock';

const clipSpec = { mode: 'clip', clip: { targetFps: 4, clipLengthMs: 1000, delayMs: 500 }, intervalMs: 500 };
const frameSpec = { mode: 'frame', frame: { intervalMs: 500 }, intervalMs: 500 };

function setup(reads: { rttMs: number; streamMs: number; state?: 'active' | 'ended'; firstFrame?: number | null }[]) {
  const clock = new FakeClock();
  const store = memoryStore({ clock });
  let calls = 0;
  const upstream = {
    async getStream(): Promise<Partial<Stream>> {
      const r = reads[Math.min(calls++, reads.length - 1)]!;
      clock.advance(r.rttMs);
      return { state: r.state ?? 'active', first_frame_at_ms: r.firstFrame === undefined ? 1 : r.firstFrame, stream_time_ms: r.streamMs };
    },
  };
  const deps = { store, upstream, cfg: { resultWindowSeconds: 600 }, logger: createLogger('silent'), clock } as unknown as StreamsContext;
  const recorder = new ResultWindowRecorder(deps);
  const session = (spec: unknown = clipSpec) =>
    new LiveStream({ streamId: 's1', accountId: 'acct', ids: {}, fallbackModels: [], spec } as unknown as LegacyRecord, 'k', {
      origin: 'adopt',
      publishToken: '',
      clock,
    });
  return { clock, store, recorder, session, calls: () => calls };
}

/** The window of a clip result sent 200 ms before a 10 ms anchor read that answered stream time 5000. */
const FIRST_CLIP = { streamId: 's1', accountId: 'acct', mode: 'clip', startMs: 3795, endMs: 4795, maxFps: 4 };

test("clip: the window ends at the stream clock of the send time, from the read round trip's midpoint", async () => {
  const t = setup([{ rttMs: 10, streamMs: 5000 }]);
  const s = t.session();
  const sentAt = t.clock.now() - 200;
  // The read starts now, answers 10 ms later: stream time 5000 at local now + 5.
  await t.recorder.record(s, 'r1', sentAt);
  expect(await t.store.getResultWindow('r1')).toEqual(FIRST_CLIP);
  // Later results use the same anchor: no second read.
  await t.recorder.record(s, 'r2', t.clock.now() + 500);
  expect(await t.store.getResultWindow('r2')).toMatchObject({ startMs: 4505, endMs: 5505 });
  expect(t.calls()).toBe(1);
});

test('frame: one frame at the send time; results waiting together share one read', async () => {
  const t = setup([{ rttMs: 4, streamMs: 1000 }]);
  const s = t.session(frameSpec);
  const now = t.clock.now();
  await Promise.all([t.recorder.record(s, 'a', now), t.recorder.record(s, 'b', now + 100)]);
  expect(t.calls()).toBe(1);
  expect(await t.store.getResultWindow('a')).toEqual({
    streamId: 's1',
    accountId: 'acct',
    mode: 'frame',
    startMs: 998,
    endMs: 998,
    maxFps: 0,
  });
  expect(await t.store.getResultWindow('b')).toMatchObject({ endMs: 1098 });
});

test('a slow read is used, then replaced by a faster one (not before 10 s); a fast one is kept', async () => {
  const t = setup([
    { rttMs: 200, streamMs: 10_000 },
    { rttMs: 2, streamMs: 20_000 },
    { rttMs: 2, streamMs: 99_999 },
  ]);
  const s = t.session();
  await t.recorder.record(s, 'r1', t.clock.now());
  expect(await t.store.getResultWindow('r1')).toMatchObject({ endMs: 9900 });
  t.clock.advance(5_000);
  await t.recorder.record(s, 'r2', t.clock.now());
  expect(t.calls()).toBe(1);
  t.clock.advance(5_000);
  // The better read is taken in the background; this result still uses the slow anchor.
  await t.recorder.record(s, 'r3', t.clock.now());
  expect(t.calls()).toBe(2);
  await t.recorder.record(s, 'r4', t.clock.now());
  expect(await t.store.getResultWindow('r4')).toMatchObject({ endMs: 20_001 });
  t.clock.advance(60_000);
  await t.recorder.record(s, 'r5', t.clock.now());
  expect(t.calls()).toBe(2);
});

test('no window before the first frame or once the stream ended; a failed read records nothing and throws nothing', async () => {
  const before = setup([{ rttMs: 1, streamMs: 0, firstFrame: null }]);
  await before.recorder.record(before.session(), 'r1', before.clock.now());
  expect(await before.store.getResultWindow('r1')).toBeUndefined();
  const ended = setup([{ rttMs: 1, streamMs: 700, state: 'ended' }]);
  await ended.recorder.record(ended.session(), 'r1', ended.clock.now());
  expect(await ended.store.getResultWindow('r1')).toBeUndefined();

  const failing = setup([]);
  (failing.recorder as unknown as { deps: { upstream: { getStream(): Promise<never> } } }).deps.upstream.getStream = () =>
    Promise.reject(new Error('down'));
  await expect(failing.recorder.record(failing.session(), 'r1', failing.clock.now())).resolves.toBeUndefined();
  expect(await failing.store.getResultWindow('r1')).toBeUndefined();
});

test('prepare starts the read once however often a tick asks; the window recorded after the commit uses that anchor', async () => {
  const t = setup([{ rttMs: 10, streamMs: 5000 }]);
  const s = t.session();
  const sentAt = t.clock.now() - 200;
  t.recorder.prepare(s);
  t.recorder.prepare(s);
  await Promise.resolve();
  await Promise.resolve();
  expect(t.calls()).toBe(1);
  expect(await t.store.getResultWindow('r1')).toBeUndefined();
  await t.recorder.record(s, 'r1', sentAt);
  expect(t.calls()).toBe(1);
  expect(await t.store.getResultWindow('r1')).toEqual(FIRST_CLIP);
});

test('a background read that fails is logged, not an unhandled rejection, and the next tick reads again', async () => {
  const t = setup([{ rttMs: 1, streamMs: 700 }]);
  const lines: string[] = [];
  const deps = (
    t.recorder as unknown as { deps: { upstream: { getStream(): Promise<unknown> }; logger: { warn(o: unknown, m: string): void } } }
  ).deps;
  const real = deps.upstream.getStream;
  deps.upstream.getStream = () => Promise.reject(new Error('down'));
  deps.logger = { warn: (_o, m) => void lines.push(m) };
  const unhandled: unknown[] = [];
  const onUnhandled = (e: unknown) => void unhandled.push(e);
  process.on('unhandledRejection', onUnhandled);
  try {
    const s = t.session();
    t.recorder.prepare(s);
    await new Promise((r) => setImmediate(r));
    expect(lines).toEqual(['stream clock not read for result windows']);
    deps.upstream.getStream = real;
    t.recorder.prepare(s);
    await new Promise((r) => setImmediate(r));
    // Stream time 700 at the middle of the 1 ms read; the result was sent at its end: 700.5 → 701.
    await t.recorder.record(s, 'r1', t.clock.now());
    expect(await t.store.getResultWindow('r1')).toMatchObject({ endMs: 701 });
  } finally {
    process.off('unhandledRejection', onUnhandled);
  }
  expect(unhandled).toEqual([]);
});

/**
 * The cadence at a hosted model's latency, on real sockets: the emulator answers like one
 * (`emulator.modelLatency`: median 700 ms, p99 2.8 s, seeded so the first answer takes 1.8 s),
 * and a 1 s frame stream's ticks overlap instead of being skipped. What is asserted is the order of
 * events (completions overlapping, results in tick order), never how long anything took.
 */
import { resultId } from '../../../src/gateway/legacy/streams/results-channel';
import { openResults } from '../../helpers/results-socket';
import { KEY, clipBody, frameBody, http, startStack, tail } from '../../helpers/stack';
import type { Stack } from '../../helpers/stack';

let stack: Stack;

beforeAll(async () => {
  stack = await startStack({ emulator: { modelLatency: { medianMs: 700, p99Ms: 2800, perFrameMs: 20 }, modelLatencySeed: 3 } });
});

afterAll(async () => {
  await stack?.close();
});

const tickOf = (streamId: string, id: string) => {
  for (let n = 0; n < 1000; n++) if (resultId(streamId, n) === id) return n;
  return -1;
};

test('a 1 s frame stream: completions overlap (at most legacy.maxInFlight), results come in tick order, all ok', async () => {
  const upstream = stack.gateway.gateway.upstream;
  const complete = upstream.chatCompletion.bind(upstream);
  let inFlight = 0;
  let most = 0;
  upstream.chatCompletion = async (...args) => {
    most = Math.max(most, ++inFlight);
    try {
      return await complete(...args);
    } finally {
      inFlight--;
    }
  };
  const created = await http(stack.url, 'POST', '/v0.2/streams', { body: frameBody({ interval_seconds: 1 }) });
  expect(created.status).toBe(201);
  const id = (created.body as { stream_id: string }).stream_id;
  const socket = await openResults(stack.url, id, KEY);
  const results = await socket.waitFor(8, 30_000);
  const ticks = results.map((r) => tickOf(id, String(r.id)));
  expect(ticks.every((t) => t >= 0)).toBe(true);
  expect(ticks).toEqual([...new Set(ticks)].sort((a, b) => a - b));
  expect(results.every((r) => r.ok === true)).toBe(true);
  // The first answer takes 1.8 s: the second tick ran beside it instead of being skipped.
  expect(most).toBeGreaterThanOrEqual(2);
  expect(most).toBeLessThanOrEqual(stack.cfg.legacy.maxInFlight);
  expect((await http(stack.url, 'DELETE', `/v0.2/streams/${id}`)).status).toBe(200);
}, 60_000);

test("a clip stream's windows stay on its grid while its ticks overlap: each asks for the second before it was due", async () => {
  // 1 s clips every 1 s at 2 fps; the emulator publishes 10 frames a second.
  const created = await http(stack.url, 'POST', '/v0.2/streams', {
    body: clipBody({ target_fps: 2, clip_length_seconds: 1, delay_seconds: 1 }),
  });
  expect(created.status).toBe(201);
  const id = (created.body as { stream_id: string }).stream_id;
  const socket = await openResults(stack.url, id, KEY);
  const results = await socket.waitFor(7, 30_000);
  const ticks = results.map((r) => tickOf(id, String(r.id)));
  expect(ticks).toEqual([...new Set(ticks)].sort((a, b) => a - b));
  // Each window starts a second (10 frames) after the one of the tick before, however long the
  // answers took: neither overlap nor gap grows (a tick sent late moves its own window only).
  const windows = results.map((r, i) => ({ tick: ticks[i]!, first: tail(String(r.result)).first }));
  for (const w of windows.slice(1)) {
    expect(Math.abs(w.first - windows[0]!.first - 10 * (w.tick - windows[0]!.tick))).toBeLessThanOrEqual(6);
  }
  expect((await http(stack.url, 'DELETE', `/v0.2/streams/${id}`)).status).toBe(200);
}, 60_000);

/** FrameWatch on fake time: what ends a WHIP stream (frames stopped, none ever came) and what does not (a short stall, a failed read). */
import { FrameWatch } from '../../../src/gateway/ingest/frame-watch';
import { FakeClock, settle } from '../../helpers/fake-clock';

const CHECK_MS = 2000;
const LOST_MS = 10_000;
const FIRST_MS = 20_000;

function setup() {
  const clock = new FakeClock(0);
  const upstream = { state: 'active', last_frame_index: null as number | null, fail: false };
  const lost: [number, string][] = [];
  const readErrors: unknown[] = [];
  let reads = 0;
  const watch = new FrameWatch({
    read: async () => {
      reads++;
      if (upstream.fail) throw new Error('upstream unreachable');
      return { state: upstream.state, last_frame_index: upstream.last_frame_index };
    },
    clock,
    checkMs: CHECK_MS,
    lostAfterMs: LOST_MS,
    firstFrameWithinMs: FIRST_MS,
    onLost: (why) => void lost.push([clock.now(), why]),
    onReadError: (err) => void readErrors.push(err),
  });
  /** Moves fake time `ms` in check-sized steps, letting each read's promise settle. */
  const run = async (ms: number, frames?: () => void) => {
    for (let t = 0; t < ms; t += CHECK_MS) {
      frames?.();
      clock.advance(CHECK_MS);
      await settle();
    }
  };
  return { clock, upstream, lost, readErrors, watch, run, reads: () => reads };
}

test('frames that keep coming never end it; frames that stop for the bound do, from the last progress', async () => {
  const { upstream, lost, run, clock } = setup();
  let index = 0;
  await run(60_000, () => void (upstream.last_frame_index = index += 30));
  expect(lost).toEqual([]);
  const lastProgressAt = clock.now();
  await run(LOST_MS + CHECK_MS);
  expect(lost).toHaveLength(1);
  expect(lost[0]![0] - lastProgressAt).toBeGreaterThanOrEqual(LOST_MS);
  expect(lost[0]![0] - lastProgressAt).toBeLessThanOrEqual(LOST_MS + CHECK_MS);
  expect(lost[0]![1]).toMatch(/^no new frame upstream for \d+ ms$/);
});

test('a 3 s stall does not end it: the frames come back before the bound', async () => {
  const { upstream, lost, run } = setup();
  let index = 0;
  await run(10_000, () => void (upstream.last_frame_index = index += 30));
  await run(4000); // no new frame for two checks (4 s)
  await run(30_000, () => void (upstream.last_frame_index = index += 30));
  expect(lost).toEqual([]);
});

test('no first frame within its bound ends it; a first frame before it does not', async () => {
  const never = setup();
  await never.run(FIRST_MS + CHECK_MS);
  expect(never.lost.map(([, why]) => why)).toEqual([expect.stringMatching(/^no frame reached the upstream within \d+ ms$/)]);

  const late = setup();
  await late.run(FIRST_MS - CHECK_MS);
  late.upstream.last_frame_index = 0;
  await late.run(LOST_MS - CHECK_MS);
  expect(late.lost).toEqual([]);
});

test('failed reads are reported and never end it; an ended upstream stream ends the watch quietly; stop() stops reading', async () => {
  const { upstream, lost, readErrors, run, reads, watch } = setup();
  upstream.last_frame_index = 5;
  await run(CHECK_MS);
  upstream.fail = true;
  await run(3 * LOST_MS);
  expect(lost).toEqual([]);
  expect(readErrors.length).toBeGreaterThanOrEqual(14);
  upstream.fail = false;
  upstream.state = 'ended';
  await run(CHECK_MS);
  const after = reads();
  await run(5 * CHECK_MS);
  expect(reads()).toBe(after);
  expect(lost).toEqual([]);
  watch.stop();

  const stopped = setup();
  stopped.watch.stop();
  await stopped.run(FIRST_MS * 2);
  expect(stopped.reads()).toBe(0);
  expect(stopped.lost).toEqual([]);
});

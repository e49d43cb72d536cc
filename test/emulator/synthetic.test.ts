import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { ServiceError } from '../../src/lib/errors';
import { i420ToRgb } from '../../src/emulator/frames/codec';
import { decodePattern } from '../../src/emulator/frames/pattern';
import type { RawFrame } from '../../src/emulator/frames/types';
import { SyntheticPublisher } from '../../src/emulator/synthetic';

const timeouts = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;

function collector() {
  const frames: { at: number; raw: RawFrame }[] = [];
  let next = 0;
  return { frames, nextIndex: () => next++, sink: (raw: RawFrame) => void frames.push({ at: performance.now(), raw }) };
}

describe('SyntheticPublisher', () => {
  const publishers: SyntheticPublisher[] = [];
  afterEach(() => {
    for (const p of publishers.splice(0)) p.stop();
  });
  const make = (opts: ConstructorParameters<typeof SyntheticPublisher>[0]) => {
    const p = new SyntheticPublisher(opts);
    publishers.push(p);
    return p;
  };

  it('sends ~20 frames in 1 s at 20 fps, anchored to the start time (no drift)', async () => {
    const c = collector();
    const pub = make({ fps: 20, width: 160, height: 120, nextIndex: c.nextIndex, sink: c.sink });
    const t0 = performance.now();
    pub.start();
    await sleep(1025);
    pub.stop();
    // Frames 0..20 are due within 1000 ms: 21, allowing for a loaded machine's late or skipped ticks.
    expect(c.frames.length).toBeGreaterThanOrEqual(15);
    expect(c.frames.length).toBeLessThanOrEqual(23);
    expect(pub.framesSent).toBe(c.frames.length);
    // Frames 0..20 (due at 0, 50, … 1000 ms) were all sent or deliberately skipped: a publisher that
    // chained relative 50 ms timeouts would drift and reach only frame 19 or so by now.
    expect(pub.framesSent + pub.framesSkipped).toBeGreaterThanOrEqual(21);
    // Each frame leaves in its own 50 ms slot (never two in one: no burst), soon after the slot opens.
    const slots = c.frames.map((f) => Math.floor((f.at - t0 + 2) / 50));
    for (let i = 1; i < slots.length; i++) expect(slots[i]!).toBeGreaterThan(slots[i - 1]!);
    const lateness = c.frames.map((f, i) => f.at - t0 - slots[i]! * 50).sort((a, b) => a - b);
    expect(lateness[Math.floor(lateness.length / 2)]!).toBeLessThan(25);
    expect(slots.at(-1)!).toBeGreaterThanOrEqual(19);
  });

  it('paints the index nextIndex returns, and stop really stops (no timer left)', async () => {
    const before = timeouts();
    const c = collector();
    const pub = make({ fps: 50, width: 64, height: 48, nextIndex: () => 1000 + c.nextIndex(), sink: c.sink });
    pub.start();
    pub.start(); // idempotent
    expect(pub.running).toBe(true);
    await sleep(120);
    expect(timeouts()).toBe(before + 1); // the publisher's next tick
    pub.stop();
    expect(pub.running).toBe(false);
    expect(timeouts()).toBe(before);
    const sent = pub.framesSent;
    expect(sent).toBeGreaterThan(0);
    await sleep(150);
    expect(pub.framesSent).toBe(sent);
    c.frames.forEach(({ raw }, i) => {
      expect(raw).toMatchObject({ width: 64, height: 48, format: 'rgb' });
      expect(decodePattern({ width: 64, height: 48, data: Buffer.from(raw.data) })).toBe(1000 + i);
    });
  });

  it('restarts after stop, and can publish native I420', async () => {
    const c = collector();
    const pub = make({ fps: 40, width: 96, height: 72, format: 'i420', nextIndex: c.nextIndex, sink: c.sink });
    pub.start();
    await sleep(60);
    pub.stop();
    const firstRun = c.frames.length;
    pub.start();
    await sleep(60);
    pub.stop();
    expect(c.frames.length).toBeGreaterThan(firstRun);
    const { raw } = c.frames.at(-1)!;
    expect(raw.format).toBe('i420');
    expect(decodePattern({ width: 96, height: 72, data: i420ToRgb(96, 72, raw.data) })).toBe(c.frames.length - 1);
  });

  it('skips frames whose time has passed instead of bursting after a stall', async () => {
    const c = collector();
    const pub = make({ fps: 20, width: 64, height: 48, nextIndex: c.nextIndex, sink: c.sink });
    pub.start();
    await sleep(30);
    const stallStart = performance.now();
    while (performance.now() - stallStart < 300) {
      // block the event loop for 300 ms (6 frame periods)
    }
    const atStallEnd = c.frames.length;
    await sleep(20);
    pub.stop();
    expect(c.frames.length - atStallEnd).toBeLessThanOrEqual(2); // one catch-up frame, not six
    expect(pub.framesSkipped).toBeGreaterThanOrEqual(4);
  });

  it('keeps going when the sink or nextIndex throws, counting and reporting the errors', async () => {
    const errors: unknown[] = [];
    let calls = 0;
    const pub = make({
      fps: 50,
      width: 64,
      height: 48,
      nextIndex: () => calls++,
      sink: () => {
        if (calls % 2 === 1) throw new Error('sink full');
      },
      onError: (err) => errors.push(err),
    });
    pub.start();
    await sleep(150);
    pub.stop();
    expect(pub.errors).toBeGreaterThan(0);
    expect(pub.framesSent).toBeGreaterThan(0);
    expect(errors).toHaveLength(pub.errors);
  });

  it('rejects bad fps and sizes with validation ServiceErrors', () => {
    const base = { width: 64, height: 48, nextIndex: () => 0, sink: () => undefined };
    for (const fps of [0, -1, Number.NaN, 1000]) expect(() => new SyntheticPublisher({ ...base, fps })).toThrow(ServiceError);
    expect(() => new SyntheticPublisher({ ...base, fps: 5, width: 8 })).toThrow(ServiceError);
  });
});

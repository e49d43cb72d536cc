import { performance } from 'node:perf_hooks';
import { deadline, sleep, until } from '../helpers/time';
import { ServiceError } from '../../src/lib/errors';
import { i420ToRgb } from '../../src/emulator/frames/codec';
import { decodePattern } from '../../src/emulator/frames/pattern';
import type { RawFrame } from '../../src/emulator/frames/types';
import { SyntheticPublisher } from '../../src/emulator/synthetic';

/**
 * Timeouts set through the global `setTimeout` from now on and still pending (neither fired nor
 * cleared): the publisher's own, whatever other timers the jest worker holds.
 */
afterEach(() => jest.restoreAllMocks());

function trackTimeouts() {
  const live = new Set<unknown>();
  const realSet = globalThis.setTimeout;
  const realClear = globalThis.clearTimeout;
  const set = jest.spyOn(globalThis, 'setTimeout').mockImplementation(((fn: (...a: unknown[]) => void, ms?: number, ...args: unknown[]) => {
    const h = realSet(() => {
      live.delete(h);
      fn(...args);
    }, ms);
    live.add(h);
    return h;
  }) as unknown as typeof setTimeout);
  const clear = jest.spyOn(globalThis, 'clearTimeout').mockImplementation(((h?: NodeJS.Timeout) => {
    live.delete(h);
    realClear(h);
  }) as typeof clearTimeout);
  return {
    pending: () => live.size,
    restore: () => {
      set.mockRestore();
      clear.mockRestore();
    },
  };
}

function collector(now: () => number = () => performance.now()) {
  const frames: { at: number; raw: RawFrame }[] = [];
  let next = 0;
  return { frames, nextIndex: () => next++, sink: (raw: RawFrame) => void frames.push({ at: now(), raw }) };
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

  it('sends frames 0..20 in 1 s at 20 fps, each at its slot, anchored to the start time (no drift)', () => {
    jest.useFakeTimers();
    try {
      const c = collector(() => jest.now());
      const t0 = jest.now();
      const pub = make({ fps: 20, width: 160, height: 120, nextIndex: c.nextIndex, sink: c.sink, now: () => jest.now() });
      pub.start();
      // Timers that fire 1-3 ms late (as real ones do) must not accumulate into drift.
      for (let i = 0; i < 20; i++) {
        jest.advanceTimersByTime(2);
        jest.advanceTimersToNextTimer();
      }
      jest.advanceTimersByTime(1000 - (jest.now() - t0));
      pub.stop();
      expect(c.frames.map((f) => Math.floor((f.at - t0) / 50))).toEqual([...Array(21).keys()]);
      expect(pub.framesSent).toBe(21);
      expect(pub.framesSkipped).toBe(0);
    } finally {
      jest.useRealTimers();
    }
  });

  it('paints the index nextIndex returns, and stop really stops (no timer left)', async () => {
    const timers = trackTimeouts();
    const c = collector();
    const pub = make({ fps: 50, width: 64, height: 48, nextIndex: () => 1000 + c.nextIndex(), sink: c.sink });
    pub.start();
    pub.start(); // idempotent
    expect(pub.running).toBe(true);
    await sleep(120);
    expect(timers.pending()).toBe(1); // the publisher's next tick
    pub.stop();
    expect(pub.running).toBe(false);
    expect(timers.pending()).toBe(0);
    timers.restore();
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

  it('hands the live outlet the same frame as I420, only while it is watched', () => {
    jest.useFakeTimers();
    try {
      const c = collector(() => jest.now());
      const pushed: { width: number; height: number; data: Uint8Array }[] = [];
      const live = { watched: false, push: (frame: (typeof pushed)[number]) => void pushed.push(frame) };
      const pub = make({ fps: 20, width: 96, height: 72, nextIndex: c.nextIndex, sink: c.sink, live, now: () => jest.now() });
      pub.start();
      jest.advanceTimersByTime(120);
      expect(c.frames.length).toBeGreaterThan(0);
      expect(pushed).toHaveLength(0);
      live.watched = true;
      const watchedFrom = c.frames.length;
      jest.advanceTimersByTime(120);
      pub.stop();
      expect(pushed).toHaveLength(c.frames.length - watchedFrom);
      pushed.forEach((frame, i) => {
        expect([frame.width, frame.height, frame.data.length]).toEqual([96, 72, 96 * 72 * 1.5]);
        expect(decodePattern({ width: 96, height: 72, data: i420ToRgb(96, 72, frame.data) })).toBe(watchedFrom + i);
        expect(c.frames[watchedFrom + i]!.raw.format).toBe('rgb'); // the sink's format is unchanged
      });
    } finally {
      jest.useRealTimers();
    }
  });

  it('skips frames whose time has passed instead of bursting after a stall', () => {
    jest.useFakeTimers();
    try {
      // A stalled event loop, seen by the publisher: its clock jumps while no timer could fire.
      let stalled = 0;
      const now = () => jest.now() + stalled;
      const c = collector(now);
      const pub = make({ fps: 20, width: 64, height: 48, nextIndex: c.nextIndex, sink: c.sink, now });
      pub.start();
      jest.advanceTimersByTime(30); // frame 0 sent
      stalled = 300; // 6 frame periods
      const atStallEnd = c.frames.length;
      jest.advanceTimersToNextTimer();
      jest.advanceTimersByTime(20);
      pub.stop();
      expect(atStallEnd).toBe(1);
      expect(c.frames.length - atStallEnd).toBe(1); // one catch-up frame, not six
      expect(pub.framesSkipped).toBe(6);
    } finally {
      jest.useRealTimers();
    }
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
    // Two frames at least (every other sink call throws): waited for, not assumed of 150 ms.
    await deadline(
      until(() => pub.errors > 0 && pub.framesSent > 0, 20),
      10_000,
      'a thrown and a sent frame',
    );
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

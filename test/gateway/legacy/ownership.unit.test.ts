import { resultId } from '../../../src/gateway/legacy/streams/results-channel';
import { resumePoint } from '../../../src/gateway/legacy/streams/ownership';

describe('resultId', () => {
  test('the same (stream, tick) gives the same UUID-shaped id on every replica; another tick another id', () => {
    const a = resultId('str_1', 7);
    expect(a).toBe(resultId('str_1', 7));
    expect(a).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(resultId('str_1', 8)).not.toBe(a);
    expect(resultId('str_2', 7)).not.toBe(a);
    const many = new Set(Array.from({ length: 1000 }, (_, n) => resultId('s', n)));
    expect(many.size).toBe(1000);
  });
});

describe('resumePoint', () => {
  test('a new owner resumes after the last published tick when it is still ahead', () => {
    expect(resumePoint({ lastTick: 9, gridStartMs: 0 }, 1000, 9_500)).toEqual({ gridStartMs: 0, n: 10 });
  });
  test('ticks already due in the past are dropped, never replayed (same grid)', () => {
    expect(resumePoint({ lastTick: 3, gridStartMs: 1_000 }, 1000, 8_200)).toEqual({ gridStartMs: 1_000, n: 8 });
    // Exactly on a due time: that tick is the next one.
    expect(resumePoint({ lastTick: 3, gridStartMs: 1_000 }, 1000, 8_000)).toEqual({ gridStartMs: 1_000, n: 7 });
  });
  test('no tick published yet starts from the grid', () => {
    expect(resumePoint({ lastTick: -1, gridStartMs: 5_000 }, 500, 5_100)).toEqual({ gridStartMs: 5_000, n: 1 });
  });
});

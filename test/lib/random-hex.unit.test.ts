/**
 * Random hex from a pooled buffer: the asked length, hex only, no repeats across the pool's refills
 * (ids drawn past the 4 KiB pool come from fresh bytes, not the old ones again).
 */
import { randomHex } from '../../src/lib/random-hex';
import { childTraceparent, newTraceId } from '../../src/lib/spans';

test('ids of the asked length, hex only, all distinct over several refills of the pool', () => {
  const seen = new Set<string>();
  for (let i = 0; i < 5_000; i++) {
    const id = randomHex(i % 2 ? 8 : 16);
    expect(id).toMatch(i % 2 ? /^[0-9a-f]{16}$/ : /^[0-9a-f]{32}$/);
    seen.add(id);
  }
  expect(seen.size).toBe(5_000);
});

test('trace ids and traceparents use it: W3C shapes, a new span id per call', () => {
  const traceId = newTraceId();
  expect(traceId).toMatch(/^[0-9a-f]{32}$/);
  const [a, b] = [childTraceparent(traceId), childTraceparent(traceId)];
  expect(a).toMatch(new RegExp(`^00-${traceId}-[0-9a-f]{16}-01$`));
  expect(b.slice(0, 36)).toBe(a.slice(0, 36));
  expect(b).not.toBe(a);
});

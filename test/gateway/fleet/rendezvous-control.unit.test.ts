import { controlChannel, encodeControl, parseControl } from '../../../src/gateway/fleet/control';
import { pickReplica } from '../../../src/gateway/fleet/rendezvous';

describe('pickReplica (rendezvous hashing)', () => {
  const ids = Array.from({ length: 300 }, (_, i) => `str_${i}`);
  test('same pick whatever the order of the list; none from an empty list', () => {
    for (const id of ids.slice(0, 20)) expect(pickReplica(id, ['a', 'b', 'c'])).toBe(pickReplica(id, ['c', 'a', 'b']));
    expect(pickReplica('x', [])).toBeUndefined();
  });
  test('spreads streams over replicas, and a replica leaving moves only its own streams', () => {
    const before = new Map(ids.map((id) => [id, pickReplica(id, ['a', 'b', 'c'])!]));
    const counts = { a: 0, b: 0, c: 0 } as Record<string, number>;
    for (const r of before.values()) counts[r]!++;
    for (const n of Object.values(counts)) expect(n).toBeGreaterThan(60);
    for (const id of ids) {
      const after = pickReplica(id, ['a', 'b'])!;
      if (before.get(id) !== 'c') expect(after).toBe(before.get(id));
    }
  });
});

describe('control messages', () => {
  test('round trip of each op; channel per replica', () => {
    expect(controlChannel('r1')).toBe('control:r1');
    for (const m of [
      { op: 'ended', streamId: 's', reason: 'client_requested' },
      { op: 'prompt', streamId: 's' },
      { op: 'adopt', streamId: 's' },
    ] as const) {
      expect(parseControl(encodeControl(m))).toEqual(m);
    }
  });
  test('anything else is refused, never thrown', () => {
    for (const bad of [
      '',
      'nope',
      'null',
      '[]',
      '{"op":"adopt"}',
      '{"op":"adopt","streamId":""}',
      '{"op":"drop","streamId":"s"}',
      '{"op":"ended","streamId":"s"}',
      '{"op":"prompt","streamId":5}',
    ]) {
      expect(parseControl(bad)).toBeUndefined();
    }
  });
});

import { fanOut } from '../../../src/gateway/telemetry/observer';
import type { LegacyObserver } from '../../../src/gateway/legacy/streams/ports';

describe('fanOut', () => {
  it('hands every event to each observer in list order, skipping absent ones and missing hooks', () => {
    const seen: string[] = [];
    const full = (name: string): LegacyObserver => ({
      streamCreated: (k) => void seen.push(`${name} created ${k}`),
      streamEnded: (k, r) => void seen.push(`${name} ended ${k} ${r}`),
      inference: (e) => void seen.push(`${name} inference ${e.model}`),
      tickSkipped: (id, reason, count) => void seen.push(`${name} skipped ${id} ${reason} ${count}`),
      tickLateness: (ms) => void seen.push(`${name} late ${ms}`),
      upstreamError: (s) => void seen.push(`${name} upstream ${s}`),
    });
    const partial: LegacyObserver = { streamEnded: (_k, r) => void seen.push(`partial ended ${r}`) };
    const o = fanOut([full('a'), undefined, partial, full('b')]);
    o.streamCreated!('k1', {} as never);
    o.streamEnded!('k1', 'lease_expired');
    o.inference!({ keyHash: 'k1', model: 'm', ok: true, tokens: 1, inferenceMs: 1, totalMs: 1, overheadMs: 0 });
    o.tickSkipped!('s', 'late', 2);
    o.tickLateness!(7);
    o.upstreamError!(503);
    expect(seen).toEqual([
      'a created k1',
      'b created k1',
      'a ended k1 lease_expired',
      'partial ended lease_expired',
      'b ended k1 lease_expired',
      'a inference m',
      'b inference m',
      'a skipped s late 2',
      'b skipped s late 2',
      'a late 7',
      'b late 7',
      'a upstream 503',
      'b upstream 503',
    ]);
  });

  it('an empty list observes nothing and throws nothing', () => {
    expect(() => fanOut([]).streamEnded!('k', 'r')).not.toThrow();
  });
});

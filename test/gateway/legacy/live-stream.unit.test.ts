import { LiveStream } from '../../../src/gateway/legacy/streams/live-stream';
import type { LegacyRecord } from '../../../src/gateway/legacy/streams/ports';
import { buildStreamRecord } from '../../../src/gateway/legacy/streams/stream-record';
import { Ticker } from '../../../src/gateway/legacy/streams/ticker';
import { setLongInterval, setLongTimeout } from '../../../src/lib/timers';
import { FakeClock } from '../../helpers/fake-clock';

function record(over: Partial<LegacyRecord> = {}): LegacyRecord {
  return {
    ...buildStreamRecord({
      streamId: 's1',
      keyHash: 'k',
      slotId: 's',
      accountId: 'a',
      nowMs: 0,
      leaseExpiresAtMs: 1000,
      prompt: 'p0',
      spec: {} as LegacyRecord['spec'],
      owner: 'r0',
      fallbackModels: ['m2'],
      ids: { traceId: 't'.repeat(32) },
    }),
    ...over,
  };
}

function setup(over: Partial<LegacyRecord> = {}, origin: 'create' | 'adopt' = 'create') {
  const clock = new FakeClock(0);
  const renewed: [string, string][] = [];
  const rec = record(over);
  const stream = new LiveStream(rec, 'key', {
    origin,
    publishToken: 'tok0',
    clock,
    source: { renewToken: (id: string, token: string) => void renewed.push([id, token]) },
  });
  return { clock, rec, stream, renewed };
}

test('the stream keeps its own copy of the record: the caller’s object and arrays stay untouched', () => {
  const { rec, stream } = setup();
  stream.adoptPrompt('p1', 3);
  stream.extendLease(5000);
  stream.bumpEpoch();
  stream.committed(4);
  stream.committed(2);
  expect(rec).toMatchObject({ prompt: 'p0', promptRev: 0, leaseExpiresAtMs: 1000, epoch: 1, lastTick: -1 });
  expect(stream.record).toMatchObject({ prompt: 'p1', promptRev: 3, leaseExpiresAtMs: 5000, epoch: 2, lastTick: 4 });
  expect(stream.record.fallbackModels).not.toBe(rec.fallbackModels);
  expect(stream.record.ids).not.toBe(rec.ids);
});

test('a record without a trace gets one of its own', () => {
  const { stream } = setup({ ids: {} } as Partial<LegacyRecord>);
  expect(stream.record.ids.traceId).toMatch(/^[0-9a-f]{32}$/);
});

test('a renewed publish token is kept and handed to the source', () => {
  const { stream, renewed } = setup();
  stream.renewToken('tok1');
  expect(stream.publishToken).toBe('tok1');
  expect(renewed).toEqual([['s1', 'tok1']]);
});

test('the grid is anchored once', () => {
  const { stream } = setup();
  expect(stream.anchorGrid(100)).toBe(true);
  expect(stream.anchorGrid(200)).toBe(false);
  expect(stream.record.gridStartMs).toBe(100);
});

test('the store record of a live stream is active, owned by the writer and carries its epoch and prompt', () => {
  const { stream } = setup({ state: 'ended', owner: 'old', costMicrocents: 9 } as Partial<LegacyRecord>);
  stream.bumpEpoch();
  const out = stream.toRecord('r1', 42);
  expect(out).toMatchObject({
    state: 'active',
    owner: 'r1',
    epoch: 2,
    costMicrocents: 0,
    lastKeepaliveAtMs: 42,
    promptUpdatedAtMs: 42,
    endReason: null,
  });
  expect(out.ids).not.toBe(stream.record.ids);
});

test('stop clears every timer and aborts calls in flight; a replaced timer is cleared when replaced', () => {
  const { clock, stream } = setup();
  const fired: string[] = [];
  stream.setLeaseCheck(setLongTimeout(() => fired.push('lease-old'), 10, { clock }));
  stream.setLeaseCheck(setLongTimeout(() => fired.push('lease'), 20, { clock }));
  stream.setUpstreamKeepalive(setLongInterval(() => fired.push('keepalive'), 5, { clock }));
  stream.setFirstFramePoll(clock.setTimeout(() => fired.push('poll'), 30));
  const ticks: number[] = [];
  stream.startTicking(new Ticker({ periodMs: 7, maxInFlight: 5, clock, onTick: async (t) => void ticks.push(t.n) }), 0, 0);
  clock.advance(7);
  expect(fired).toEqual(['keepalive']);
  expect(ticks).toEqual([0, 1]);
  stream.stop();
  expect(stream.stopping).toBe(true);
  expect(stream.signal.aborted).toBe(true);
  clock.advance(100);
  expect(fired).toEqual(['keepalive']);
  expect(ticks).toEqual([0, 1]);
});

test('an end claims the stop once; a failed end lets the stream run on', () => {
  const { stream } = setup();
  expect(stream.beginEnd()).toBe(true);
  expect(stream.beginEnd()).toBe(false);
  stream.cancelEnd();
  expect(stream.stopping).toBe(false);
  expect(stream.signal.aborted).toBe(false);
  expect(stream.beginEnd()).toBe(true);
});

test('a create is `creating` until started, an adoption `adopting`; then `live`', () => {
  const created = setup().stream;
  expect(created.phase).toBe('creating');
  created.started();
  expect(created.phase).toBe('live');
  const adopted = setup({}, 'adopt').stream;
  expect(adopted.phase).toBe('adopting');
  adopted.started();
  expect(adopted.phase).toBe('live');
  expect(adopted.stopping).toBe(false);
});

test('stopping outranks every phase: a failed end returns the stream to its phase; a start after a stop leaves it stopping', () => {
  const { stream } = setup();
  expect(stream.beginEnd()).toBe(true);
  expect(stream.phase).toBe('stopping');
  stream.cancelEnd();
  expect(stream.phase).toBe('creating');
  stream.started();
  stream.stop();
  expect(stream.phase).toBe('stopping');
  // A start that finishes after the stream stopped leaves it stopping.
  stream.started();
  expect(stream.phase).toBe('stopping');
  expect(stream.stopping).toBe(true);
});

test('a started stream whose end is pending becomes live once the end is called off', () => {
  const { stream } = setup();
  expect(stream.beginEnd()).toBe(true);
  stream.started();
  expect(stream.phase).toBe('stopping');
  stream.cancelEnd();
  expect(stream.phase).toBe('live');
});

test('one record write-back at a time, per stream', () => {
  const { stream } = setup();
  const other = setup().stream;
  expect(stream.beginWriteBack()).toBe(true);
  expect(stream.beginWriteBack()).toBe(false);
  expect(other.beginWriteBack()).toBe(true);
  stream.endWriteBack();
  expect(stream.beginWriteBack()).toBe(true);
});

test('the rate-limit jitter is drawn once per stream', () => {
  const { stream } = setup();
  let draws = 0;
  const draw = () => (++draws, 0.25);
  expect(stream.backoffJitter(draw)).toBe(0.25);
  expect(stream.backoffJitter(draw)).toBe(0.25);
  expect(draws).toBe(1);
});

import { buildStreamRecord, ownerRecord } from '../../../src/gateway/legacy/streams/stream-record';
import type { StreamRecord } from '../../../src/gateway/store/store';

const ids = { requestId: 'req-1', traceId: 't'.repeat(32), spanId: 's'.repeat(16) };
const created = {
  streamId: 's1',
  keyHash: 'kh',
  slotId: 'slot-1',
  accountId: 'acct',
  nowMs: 5_000,
  leaseExpiresAtMs: 50_000,
  prompt: 'p',
  spec: { mode: 'frame' },
  owner: 'gw-a',
  pinned: true,
  sealedKey: 'sealed',
  fallbackModels: ['m2'],
  ids,
  upstreamLeaseSeconds: 30,
};

test("a create's record: every field, in the order the store writes them", () => {
  expect(Object.entries(buildStreamRecord(created))).toEqual(
    Object.entries({
      streamId: 's1',
      keyHash: 'kh',
      slotId: 'slot-1',
      accountId: 'acct',
      state: 'active',
      endReason: null,
      createdAtMs: 5_000,
      endedAtMs: null,
      leaseExpiresAtMs: 50_000,
      prompt: 'p',
      promptUpdatedAtMs: 5_000,
      spec: { mode: 'frame' },
      owner: 'gw-a',
      epoch: 1,
      lastTick: -1,
      gridStartMs: null,
      costMicrocents: 0,
      lastKeepaliveAtMs: 5_000,
      promptRev: 0,
      pinned: true,
      sealedKey: 'sealed',
      fallbackModels: ['m2'],
      ids,
      upstreamLeaseSeconds: 30,
    }),
  );
});

test('a record nobody owns yet is at epoch 0, movable, without key, fallbacks or trace; optional fields absent', () => {
  const rec = buildStreamRecord({
    streamId: 's2',
    keyHash: 'k',
    slotId: 's',
    accountId: 'a',
    nowMs: 0,
    leaseExpiresAtMs: 0,
    prompt: 'p',
    spec: null,
    owner: null,
  });
  expect(rec).toMatchObject({ owner: null, epoch: 0, pinned: false, sealedKey: '', fallbackModels: [], ids: { traceId: '' } });
  for (const field of ['creditsRefusedAtMs', 'mediaSession', 'upstreamLeaseSeconds', 'inferencesCompleted', 'frameWidth']) {
    expect(rec).not.toHaveProperty(field);
  }
});

test("an owner's write keeps what the record carries and sets anew what every write sets, lists copied", () => {
  const running: StreamRecord = {
    ...buildStreamRecord({ ...created, epoch: 3, lastTick: 7, gridStartMs: 6_000, promptRev: 2, createdAtMs: 1_000 }),
    state: 'ended',
    endReason: 'x',
    endedAtMs: 9_000,
    costMicrocents: 500,
    creditsRefusedAtMs: 8_000,
    mediaSession: { kind: 'whip', resource: 'https://room/whip/1', token: 'tok' },
    inferencesCompleted: 4,
  };
  const out = ownerRecord(running, 'gw-b', 10_000);
  expect(Object.entries(out)).toEqual(
    Object.entries({
      ...running,
      state: 'active',
      endReason: null,
      endedAtMs: null,
      promptUpdatedAtMs: 10_000,
      owner: 'gw-b',
      costMicrocents: 0,
      lastKeepaliveAtMs: 10_000,
    }),
  );
  expect(out.ids).not.toBe(running.ids);
  expect(out.fallbackModels).not.toBe(running.fallbackModels);
  const { upstreamLeaseSeconds: _absent, ...without } = running;
  expect(ownerRecord(without, 'gw-b', 10_000)).not.toHaveProperty('upstreamLeaseSeconds');
});

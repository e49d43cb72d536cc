import { isStreamId, readStreamAccess } from '../../../src/gateway/legacy/http/access';
import { streamAccess } from '../../../src/gateway/legacy/streams/ownership';
import { memoryStore } from '../../../src/gateway/store/memory';
import { streamRecord } from '../../helpers/stack';

describe('stream id rule', () => {
  it.each([
    ['3f0c4f5e-7b1a-4c1e-9a55-0d9f2b7c1a01', true],
    ['a', true],
    ['a_b-C9', true],
    ['x'.repeat(128), true],
    ['x'.repeat(129), false],
    ['', false],
    ['a/b', false],
    ['a.b', false],
    ['a b', false],
    ['..', false],
    [undefined, false],
    [42, false],
  ])('%j → %j', (id, ok) => expect(isStreamId(id)).toBe(ok));
});

describe('may this account touch this stream', () => {
  const rec = streamRecord('s1', 'acct-a');
  it.each([
    [rec, 'acct-a', { ok: true, record: rec }],
    // Another account's stream is refused exactly as a missing one: no existence leak.
    [rec, 'acct-b', { ok: false }],
    [null, 'acct-a', { ok: false }],
    [undefined, 'acct-a', { ok: false }],
  ])('record %#', (r, account, want) => expect(streamAccess(r, account)).toEqual(want));

  it('reads the store, and never for a malformed id', async () => {
    const store = memoryStore();
    await store.putRecord(rec);
    const reads: string[] = [];
    const get = store.getRecord.bind(store);
    store.getRecord = (id) => (reads.push(id), get(id));
    await expect(readStreamAccess(store, 's1', 'acct-a')).resolves.toEqual({ ok: true, record: rec });
    await expect(readStreamAccess(store, 's1', 'acct-b')).resolves.toEqual({ ok: false });
    await expect(readStreamAccess(store, '../s1', 'acct-a')).resolves.toEqual({ ok: false });
    expect(reads).toEqual(['s1', 's1']);
    await store.close();
  });
});

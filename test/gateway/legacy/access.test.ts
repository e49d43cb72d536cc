import { accessClose, accessError, isStreamId, readStreamAccess, streamAccess } from '../../../src/gateway/legacy/access';
import { MemoryStore } from '../../../src/gateway/store/memory';
import { sessionRecord } from '../../helpers/stack';

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
  const rec = sessionRecord('s1', 'acct-a');
  it.each([
    [rec, 'acct-a', { ok: true, record: rec }],
    [rec, 'acct-b', { ok: false, refusal: 'forbidden' }],
    [null, 'acct-a', { ok: false, refusal: 'stream_not_found' }],
    [undefined, 'acct-a', { ok: false, refusal: 'stream_not_found' }],
  ])('record %#', (r, account, want) => expect(streamAccess(r, account)).toEqual(want));

  it('HTTP answers 404 / 403, the socket closes 1008 with the code as reason', () => {
    expect(accessError('stream_not_found', 's1')).toMatchObject({ status: 404, code: 'stream_not_found', message: 'Stream s1 not found' });
    expect(accessError('forbidden', 's1')).toMatchObject({ status: 403, code: 'forbidden' });
    expect(accessClose('stream_not_found')).toEqual({ code: 1008, reason: 'stream_not_found' });
    expect(accessClose('forbidden')).toEqual({ code: 1008, reason: 'forbidden' });
  });

  it('reads the store, and never for a malformed id', async () => {
    const store = new MemoryStore();
    await store.putSession(rec);
    const reads: string[] = [];
    const get = store.getSession.bind(store);
    store.getSession = (id) => (reads.push(id), get(id));
    await expect(readStreamAccess(store, 's1', 'acct-a')).resolves.toEqual({ ok: true, record: rec });
    await expect(readStreamAccess(store, 's1', 'acct-b')).resolves.toEqual({ ok: false, refusal: 'forbidden' });
    await expect(readStreamAccess(store, '../s1', 'acct-a')).resolves.toEqual({ ok: false, refusal: 'stream_not_found' });
    expect(reads).toEqual(['s1', 's1']);
    await store.close();
  });
});

/**
 * A hostile tenant on /v0.2 (strings and schemas over their caps, costly schema compiles, feedback
 * floods), on a real gateway + emulator: every request is refused (or bounded) in the legacy error
 * shape, and nothing leaks.
 */
import { clipBody, http, KEY, KEY_BROKE, startStack } from '../../helpers/stack';
import type { Stack } from '../../helpers/stack';
import { keyHash } from '../../../src/lib/keys';
import { memoryStore } from '../../../src/gateway/store/memory';
import { buildStreamRecord } from '../../../src/gateway/legacy/streams/stream-record';
import { slotsInUse } from '../../helpers/store-ops';

const legacyShape = { error: expect.any(String), message: expect.any(String), request_id: expect.any(String) };

describe('hostile tenant on /v0.2', () => {
  let s: Stack;
  beforeAll(async () => {
    s = await startStack({ legacy: { feedback: { perStream: 3, perAccount: 5, pageSize: 2 } } });
  });
  afterAll(async () => {
    await s.close();
  });

  test.each([2147484, 1e308, 3600.5])('delay_seconds %p is a 422 naming the bound', async (delay) => {
    const r = await http(s.url, 'POST', '/v0.2/streams', { body: clipBody({ delay_seconds: delay }) });
    expect(r.status).toBe(422);
    expect(r.body).toMatchObject({
      ...legacyShape,
      error: 'validation_error',
      details: [
        { loc: ['body', 'processing', 'delay_seconds'], type: 'less_than_equal', msg: 'Input should be less than or equal to 3600' },
      ],
    });
    expect(await slotsInUse(s.gateway.gateway.store, keyHash(KEY))).toBe(0);
  });

  test('strings over their caps are 422 string_too_long (prompt, model, request id)', async () => {
    const r = await http(s.url, 'POST', '/v0.2/streams', {
      body: { ...clipBody({}, { prompt: 'p'.repeat(32_769), model: 'm'.repeat(257) }), client: { request_id: 'r'.repeat(257) } },
    });
    expect(r.status).toBe(422);
    const locs = (r.body as { details: { loc: string[]; type: string }[] }).details.map((d) => `${d.loc.join('.')}:${d.type}`);
    expect(locs.sort()).toEqual([
      'body.client.request_id:string_too_long',
      'body.inference.model:string_too_long',
      'body.inference.prompt:string_too_long',
    ]);
  });

  test('a prompt PATCH over the prompt cap is a 422; the stream keeps its prompt', async () => {
    const id = ((await http(s.url, 'POST', '/v0.2/streams', { body: clipBody() })).body as { stream_id: string }).stream_id;
    const r = await http(s.url, 'PATCH', `/v0.2/streams/${id}/config/prompt`, { body: { prompt: 'p'.repeat(32_769) } });
    expect(r.status).toBe(422);
    expect(r.body).toMatchObject({ ...legacyShape, details: [{ loc: ['body', 'prompt'], type: 'string_too_long' }] });
    expect((await s.gateway.gateway.store.getRecord(id))?.prompt).toBe('What happens?');
    await http(s.url, 'DELETE', `/v0.2/streams/${id}`);
  });

  test('a 3,000-property output schema is a 422 before any compile, even for a key without credits', async () => {
    const properties: Record<string, unknown> = {};
    for (let i = 0; i < 3000; i++) properties[`field_${i}`] = { type: 'string', description: `property number ${i}` };
    for (const key of [KEY, KEY_BROKE]) {
      const r = await http(s.url, 'POST', '/v0.2/streams', {
        key,
        body: clipBody({}, { output_schema_json: { type: 'object', properties } }),
      });
      expect(r.status).toBe(422);
      expect(r.body).toMatchObject({
        ...legacyShape,
        details: [{ loc: ['body', 'inference', 'output_schema_json'], type: 'value_error' }],
      });
    }
    expect(s.gateway.gateway.streams.schemas.size).toBe(0);
  });

  test('the schema is compiled only after slot and credit checks; an invalid one frees the slot', async () => {
    const invalid = { type: 'no-such-type' };
    const broke = await http(s.url, 'POST', '/v0.2/streams', { key: KEY_BROKE, body: clipBody({}, { output_schema_json: invalid }) });
    expect(broke.status).toBe(402);
    expect(s.gateway.gateway.streams.schemas.size).toBe(0);

    const bad = await http(s.url, 'POST', '/v0.2/streams', { body: clipBody({}, { output_schema_json: invalid }) });
    expect(bad.status).toBe(422);
    expect(bad.body).toMatchObject({ ...legacyShape, error: 'validation_error' });
    expect(await slotsInUse(s.gateway.gateway.store, keyHash(KEY))).toBe(0);

    // Same content twice: one compile (cached by content hash).
    const schema = () => ({ type: 'object', properties: { answer: { type: 'string', pattern: '^(x+x+)+y$' } } });
    const ids: string[] = [];
    for (let i = 0; i < 2; i++) {
      const r = await http(s.url, 'POST', '/v0.2/streams', { body: clipBody({}, { output_schema_json: schema() }) });
      expect(r.status).toBe(201);
      ids.push((r.body as { stream_id: string }).stream_id);
    }
    expect(s.gateway.gateway.streams.schemas.size).toBe(2); // the invalid one and this one
    for (const id of ids) await http(s.url, 'DELETE', `/v0.2/streams/${id}`);
  });

  test('feedback: size cap, per-stream and per-account caps, refused once ended, paginated list', async () => {
    const create = async () => ((await http(s.url, 'POST', '/v0.2/streams', { body: clipBody() })).body as { stream_id: string }).stream_id;
    const post = (id: string, feedback = 'ok') =>
      http(s.url, 'POST', `/v0.2/streams/${id}/feedback`, { body: { rating: 4, category: 'accuracy', feedback } });
    const a = await create();

    const tooLong = await post(a, 'f'.repeat(4097));
    expect(tooLong.status).toBe(422);
    expect(tooLong.body).toMatchObject({ details: [{ loc: ['body', 'feedback'], type: 'string_too_long' }] });

    for (let i = 0; i < 3; i++) expect((await post(a, `n${i}`)).status).toBe(200);
    const streamFull = await post(a);
    expect(streamFull.status).toBe(422);
    expect(streamFull.body).toMatchObject({
      ...legacyShape,
      error: 'feedback_limit_reached',
      message: 'Feedback limit reached: at most 3 entries per stream',
    });

    const b = await create();
    for (let i = 0; i < 2; i++) expect((await post(b, `m${i}`)).status).toBe(200);
    const accountFull = await post(b);
    expect(accountFull.body).toMatchObject({
      error: 'feedback_limit_reached',
      message: 'Feedback limit reached: at most 5 entries per account',
    });

    // Bare array (legacy shape), pageSize 2, next page announced in headers.
    const seen: string[] = [];
    let path: string | null = '/v0.2/streams/feedback';
    let pages = 0;
    while (path) {
      const page = await http(s.url, 'GET', path);
      expect(page.status).toBe(200);
      expect(Array.isArray(page.body)).toBe(true);
      seen.push(...(page.body as { feedback: string }[]).map((f) => f.feedback));
      // The deprecation Link stays; the next page is one more link.
      expect(page.headers.get('link')).toContain('rel="deprecation"');
      path = /<([^>]+)>; rel="next"/.exec(page.headers.get('link') ?? '')?.[1] ?? null;
      if (path) expect(path).toContain(`cursor=${page.headers.get('x-next-cursor')}`);
      pages++;
    }
    expect(seen).toEqual(['n0', 'n1', 'n2', 'm0', 'm1']);
    expect(pages).toBe(3);
    expect((await http(s.url, 'GET', '/v0.2/streams/feedback?limit=5')).body).toHaveLength(5);
    for (const q of ['limit=0', 'limit=abc', 'limit=100000', 'cursor=%0a']) {
      const r = await http(s.url, 'GET', `/v0.2/streams/feedback?${q}`);
      expect(r.status).toBe(422);
      expect(r.body).toMatchObject({
        error: 'validation_error',
        details: [{ loc: [expect.stringMatching(/^query$/), expect.any(String)] }],
      });
    }

    await http(s.url, 'DELETE', `/v0.2/streams/${b}`);
    const ended = await post(b);
    expect(ended.status).toBe(404);
    expect(ended.body).toMatchObject({ ...legacyShape, error: 'stream_not_found' });
    await http(s.url, 'DELETE', `/v0.2/streams/${a}`);
  });
});

describe('feedback pruned with the tombstone (memory store, fake clock)', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  test('an expired session takes its feedback (and its per-stream count) with it', async () => {
    const store = memoryStore();
    const limits = { perStream: 2, perAccount: 3 };
    const rec = (streamId: string) => ({
      ...buildStreamRecord({
        streamId,
        keyHash: 'k',
        slotId: 's',
        accountId: 'acct',
        nowMs: 0,
        leaseExpiresAtMs: 0,
        prompt: 'p',
        spec: null,
        owner: null,
      }),
      state: 'ended' as const,
      endReason: 'x',
      endedAtMs: 0,
    });
    const fb = (id: string, streamId: string) => ({
      id,
      stream_id: streamId,
      accountId: 'acct',
      rating: 1,
      category: 'c',
      feedback: 'f',
      created_at: '',
      updated_at: '',
    });
    await store.putRecord(rec('s1'));
    await store.putRecord(rec('s2'));
    expect(await store.addFeedback(fb('1', 's1'), limits)).toBe('ok');
    expect(await store.addFeedback(fb('2', 's1'), limits)).toBe('ok');
    expect(await store.addFeedback(fb('3', 's1'), limits)).toBe('stream_full');
    expect(await store.addFeedback(fb('4', 's2'), limits)).toBe('ok');
    expect(await store.addFeedback(fb('5', 's2'), limits)).toBe('account_full');

    await store.expireRecord('s1', 1000);
    jest.advanceTimersByTime(999);
    expect((await store.feedbackOf('acct', { limit: 10 })).items).toHaveLength(3);
    jest.advanceTimersByTime(1);
    expect((await store.feedbackOf('acct', { limit: 10 })).items.map((f) => f.id)).toEqual(['4']);
    expect(await store.addFeedback(fb('6', 's2'), limits)).toBe('ok'); // the account has room again
    await store.close();
  });
});

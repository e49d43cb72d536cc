/**
 * The content type of /v0.2 bodies on real sockets: JSON with a JSON type or none (as the old
 * service read it), a refusal naming content-type for any other type, an empty body always fine.
 */
import { frameBody, KEY, startStack } from '../../helpers/stack';
import type { Stack } from '../../helpers/stack';

interface Answer {
  status: number;
  body: { error?: string; message?: string; details?: unknown; stream_id?: string };
}

describe('/v0.2 request bodies and their content type', () => {
  let s: Stack;
  beforeAll(async () => {
    s = await startStack();
  });
  afterAll(async () => {
    await s.close();
  });

  /** A raw request: bytes as the body, so fetch adds no content type of its own. */
  async function send(method: string, path: string, body: string, contentType?: string): Promise<Answer> {
    const headers: Record<string, string> = { authorization: `Bearer ${KEY}` };
    if (contentType !== undefined) headers['content-type'] = contentType;
    const res = await fetch(`${s.url}${path}`, { method, headers, body: Buffer.from(body) });
    return { status: res.status, body: (await res.json()) as Answer['body'] };
  }

  test('a JSON body without a content type is read as JSON', async () => {
    const created = await send('POST', '/v0.2/streams', JSON.stringify(frameBody({ interval_seconds: 5 })));
    expect(created.status).toBe(201);
    const id = created.body.stream_id!;
    // A body-less keepalive with any content type (content-length 0) is fine.
    expect((await send('POST', `/v0.2/streams/${id}/keepalive`, '', 'application/x-www-form-urlencoded')).status).toBe(200);
    expect((await send('DELETE', `/v0.2/streams/${id}`, '')).status).toBe(200);
  });

  test.each(['application/x-www-form-urlencoded', 'text/plain;charset=UTF-8'])(
    'a body sent as %s is refused naming content-type, not read as empty',
    async (type) => {
      const answer = await send('POST', '/v0.2/streams', JSON.stringify(frameBody()), type);
      expect(answer.status).toBe(400);
      expect(answer.body.error).toBe('invalid_body');
      expect(answer.body.message).toContain(`content-type: application/json (got content-type: ${type})`);
      expect(answer.body.details).toEqual([expect.objectContaining({ loc: ['header', 'content-type'], type: 'content_type' })]);
    },
  );

  test('JSON types with a suffix or parameters are JSON; a body without a type that is not JSON is invalid JSON', async () => {
    const withCharset = await send(
      'POST',
      '/v0.2/streams',
      JSON.stringify(frameBody({ interval_seconds: 5 })),
      'application/json; charset=utf-8',
    );
    expect(withCharset.status).toBe(201);
    expect((await send('DELETE', `/v0.2/streams/${withCharset.body.stream_id}`, '', 'application/json')).status).toBe(200);
    const notJson = await send('POST', '/v0.2/streams', 'mode=frame');
    expect(notJson.status).toBe(400);
    expect(notJson.body).toMatchObject({ error: 'invalid_body', message: expect.stringMatching(/^Invalid JSON/) });
  });
});

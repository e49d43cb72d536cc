/**
 * The /v0.2 OpenAPI 3.1 document: served with the deprecation marked, structurally an OpenAPI 3.1
 * document, every component a compilable JSON Schema 2020-12, and real gateway responses (create,
 * keepalive, prompt, models, feedback, delete, errors) valid against the response schemas it lists.
 */
import Ajv2020 from 'ajv/dist/2020';
import type { ValidateFunction } from 'ajv';
import { clipBody, frameBody, http, KEY_B, KEY_REVOKED, openResults, reinfer as reinferResult, startStack } from '../helpers/stack';
import type { Stack } from '../helpers/stack';

type Doc = {
  openapi: string;
  paths: Record<string, Record<string, { deprecated?: boolean; responses: Record<string, { content?: Record<string, { schema: { $ref: string } }> }> }>>;
  components: { schemas: Record<string, object> };
};

/** The OpenAPI 3.1 structure this document must have (the parts of the spec's schema it uses). */
const OPENAPI_31 = {
  $defs: {
    ref: { type: 'object', required: ['$ref'], properties: { $ref: { type: 'string', pattern: '^#/components/schemas/' } } },
    media: { type: 'object', required: ['schema'], properties: { schema: { $ref: '#/$defs/ref' } } },
    content: { type: 'object', additionalProperties: { $ref: '#/$defs/media' } },
    response: { type: 'object', required: ['description'], properties: { description: { type: 'string' }, content: { $ref: '#/$defs/content' } }, additionalProperties: false },
    parameter: {
      type: 'object',
      required: ['name', 'in', 'schema'],
      properties: { name: { type: 'string' }, in: { enum: ['path', 'query', 'header', 'cookie'] }, required: { type: 'boolean' }, schema: { type: 'object' } },
      if: { properties: { in: { const: 'path' } } },
      then: { required: ['required'], properties: { required: { const: true } } },
    },
    operation: {
      type: 'object',
      required: ['responses'],
      properties: {
        summary: { type: 'string' },
        description: { type: 'string' },
        deprecated: { type: 'boolean' },
        parameters: { type: 'array', items: { $ref: '#/$defs/parameter' } },
        requestBody: { type: 'object', required: ['content'], properties: { required: { type: 'boolean' }, content: { $ref: '#/$defs/content' } } },
        responses: { type: 'object', minProperties: 1, propertyNames: { pattern: '^([1-5][0-9X]{2}|default)$' }, additionalProperties: { $ref: '#/$defs/response' } },
        security: { type: 'array', items: { type: 'object' } },
      },
      additionalProperties: false,
    },
  },
  type: 'object',
  required: ['openapi', 'info', 'paths'],
  properties: {
    openapi: { type: 'string', pattern: '^3\\.1\\.\\d+$' },
    info: { type: 'object', required: ['title', 'version'], properties: { title: { type: 'string' }, version: { type: 'string' } } },
    servers: { type: 'array', items: { type: 'object', required: ['url'] } },
    externalDocs: { type: 'object', required: ['url'] },
    paths: {
      type: 'object',
      propertyNames: { pattern: '^/' },
      additionalProperties: {
        type: 'object',
        propertyNames: { enum: ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace', 'parameters'] },
        additionalProperties: { $ref: '#/$defs/operation' },
      },
    },
    components: {
      type: 'object',
      properties: {
        schemas: { type: 'object', additionalProperties: { type: 'object' } },
        securitySchemes: { type: 'object', additionalProperties: { type: 'object', required: ['type'] } },
      },
    },
  },
};

describe('/v0.2/openapi.json', () => {
  let stack: Stack;
  let doc: Doc;
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  const validators = new Map<string, ValidateFunction>();

  /** Validates a real response against the schema the document names for its path, method and status. */
  function check(path: string, method: string, res: { status: number; body: unknown }): void {
    const op = doc.paths[path]?.[method];
    expect(op).toBeDefined();
    const media = op!.responses[String(res.status)]?.content?.['application/json'];
    if (!media) throw new Error(`${method} ${path} does not document status ${res.status}`);
    const name = media.schema.$ref.split('/').pop()!;
    const v = validators.get(name)!;
    if (!v(res.body)) throw new Error(`${method} ${path} ${res.status} does not match ${name}: ${ajv.errorsText(v.errors)}`);
  }

  beforeAll(async () => {
    stack = await startStack({ deprecation: { sunset: '2026-12-31T00:00:00Z', link: 'https://docs.example.com/migrate' } });
    const res = await fetch(`${stack.url}/v0.2/openapi.json`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(res.headers.get('deprecation')).toMatch(/^@\d+$/);
    doc = (await res.json()) as Doc;
    for (const [name, schema] of Object.entries(doc.components.schemas)) validators.set(name, ajv.compile(schema));
  });
  afterAll(() => stack.close());

  test('is an OpenAPI 3.1 document with every operation deprecated and every component a valid JSON Schema 2020-12', () => {
    const validate = ajv.compile(OPENAPI_31);
    expect(validate(doc) ? [] : validate.errors).toEqual([]);
    const ops = Object.values(doc.paths).flatMap((p) => Object.values(p));
    expect(ops.length).toBe(9);
    expect(ops.every((o) => o.deprecated === true)).toBe(true);
    // Every $ref resolves.
    const refs = JSON.stringify(doc.paths).match(/#\/components\/schemas\/\w+/g) ?? [];
    for (const r of refs) expect(doc.components.schemas).toHaveProperty(r.split('/').pop()!);
    expect(validators.size).toBe(Object.keys(doc.components.schemas).length);
  });

  test('the request schemas accept what the router accepts and reject what it rejects', () => {
    const create = validators.get('CreateStreamRequest')!;
    expect(create(clipBody())).toBe(true);
    expect(create(frameBody({ interval_seconds: 2 }))).toBe(true);
    expect(create({ ...frameBody(), extra: 1 })).toBe(false);
    expect(create({ processing: { interval_seconds: 1 } })).toBe(false); // no inference
  });

  test('real responses validate: create, keepalive, prompt, models, feedback, delete and legacy errors', async () => {
    const { url } = stack;
    const created = await http(url, 'POST', '/v0.2/streams', { body: frameBody({ interval_seconds: 5 }) });
    expect(created.status).toBe(201);
    check('/v0.2/streams', 'post', created);
    expect(validators.get('KeepaliveResponse')!(created.body)).toBe(false); // the schemas are strict enough to tell bodies apart
    const id = (created.body as { stream_id: string }).stream_id;
    const path = (p: string) => `/v0.2/streams/{stream_id}${p}`;

    check(path('/keepalive'), 'post', await http(url, 'POST', `/v0.2/streams/${id}/keepalive`));
    check(path('/config/prompt'), 'patch', await http(url, 'PATCH', `/v0.2/streams/${id}/config/prompt`, { body: { prompt: 'Count' } }));
    check(path('/feedback'), 'post', await http(url, 'POST', `/v0.2/streams/${id}/feedback`, { body: { rating: 5, category: 'accuracy', feedback: 'ok' } }));
    check('/v0.2/streams/feedback', 'get', await http(url, 'GET', '/v0.2/streams/feedback'));
    check('/v0.2/models', 'get', await http(url, 'GET', '/v0.2/models'));
    check(path(''), 'delete', await http(url, 'DELETE', `/v0.2/streams/${id}`));

    // Errors, all in the legacy shape.
    const unauthorized = await http(url, 'POST', '/v0.2/streams', { key: KEY_REVOKED, body: frameBody() });
    expect(unauthorized.status).toBe(401);
    check('/v0.2/streams', 'post', unauthorized);
    const invalid = await http(url, 'POST', '/v0.2/streams', { body: frameBody({ interval_seconds: 'x' }) });
    expect(invalid.status).toBe(422);
    check('/v0.2/streams', 'post', invalid);
    const malformed = await http(url, 'POST', '/v0.2/streams', { raw: '{"not json' });
    expect(malformed.status).toBe(400);
    check('/v0.2/streams', 'post', malformed);
    const ended = await http(url, 'POST', `/v0.2/streams/${id}/keepalive`);
    expect(ended.status).toBe(404);
    check(path('/keepalive'), 'post', ended);
  });

  test('real responses validate: reinfer (200, 404, 410, 422) and /v0.2/healthz', async () => {
    const { url } = stack;
    const reinfer = '/v0.2/chat/completions/clip';
    const created = await http(url, 'POST', '/v0.2/streams', { body: frameBody({ interval_seconds: 0.5 }) });
    const id = (created.body as { stream_id: string }).stream_id;
    const sock = await openResults(url, id);
    const [result] = await sock.waitFor(1, 20_000);
    sock.ws.close();
    const body = { result_id: result!.id, prompt: 'again', model: 'local/analyzer' };
    const ok = await reinferResult(url, body);
    expect(ok.status).toBe(200);
    check(reinfer, 'post', ok);
    expect(validators.get('ReinferRequest')!(body)).toBe(true);
    expect(validators.get('ReinferRequest')!({ ...body, extra: 1 })).toBe(false);
    check(reinfer, 'post', await http(url, 'POST', reinfer, { key: KEY_B, body }));
    check(reinfer, 'post', await http(url, 'POST', reinfer, { body: { ...body, prompt: '' } }));
    await http(url, 'DELETE', `/v0.2/streams/${id}`);
    const gone = await http(url, 'POST', reinfer, { body });
    expect(gone.status).toBe(410);
    check(reinfer, 'post', gone);

    const health = await http(url, 'GET', '/v0.2/healthz', { key: null });
    const media = doc.paths['/v0.2/healthz']!.get!.responses['200']!.content!['text/plain']!;
    expect(validators.get(media.schema.$ref.split('/').pop()!)!(health.body)).toBe(true);
  }, 60_000);
});

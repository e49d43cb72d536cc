/**
 * The /v0.2 OpenAPI 3.1 document: served with the deprecation marked, structurally an OpenAPI 3.1
 * document, every component a compilable JSON Schema 2020-12, real gateway responses (create,
 * keepalive, prompt, models, feedback, delete, errors) valid against the response schemas it lists,
 * and every operation of the provider's published v0.2 document present with its statuses and
 * schemas (PROVIDER_OPERATIONS, PROVIDER_SCHEMAS), under the default profile and the provider's own
 * brand.
 */
import Ajv2020 from 'ajv/dist/2020';
import type { ValidateFunction } from 'ajv';
import { brandOf } from '../../src/brand';
import type { Brand } from '../../src/brand';
import { legacyOpenApi } from '../../src/gateway/legacy/contract/openapi';
import { KEY, clipBody, frameBody, http, KEY_B, KEY_REVOKED, reinfer as reinferResult, startStack } from '../helpers/stack';
import { openResults } from '../helpers/results-socket';
import type { Stack } from '../helpers/stack';

type Schema = Record<string, unknown> & { $ref?: string; properties?: Record<string, Schema>; required?: string[] };
type Media = { schema: Schema };
type Operation = {
  deprecated?: boolean;
  security?: unknown[];
  requestBody?: { content: Record<string, Media> };
  responses: Record<string, { content?: Record<string, Media> }>;
};
type Doc = {
  openapi: string;
  servers: unknown;
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, Schema>; securitySchemes: Record<string, unknown> };
};

/**
 * The provider's published v0.2 document (api-reference/v0.2/openapi.json of github.com/Overshoot-ai/docs)
 * as facts. Its operations: path (relative to its server `/v0.2`), method, request body, and every
 * status it lists with the schema of its body (`[Name]`: an array of Name; null: no body).
 */
const E = 'ErrorResponse';
const PROVIDER_OPERATIONS: Array<{ path: string; method: string; request?: string; statuses: Record<number, string | null> }> = [
  {
    path: '/streams',
    method: 'post',
    request: 'StreamCreateRequest',
    statuses: { 201: 'StreamCreateResponse', 400: E, 401: E, 402: E, 422: E, 429: E, 500: E },
  },
  {
    path: '/streams/{stream_id}/keepalive',
    method: 'post',
    statuses: { 200: 'KeepaliveResponse', 400: E, 401: E, 402: E, 404: E, 422: E, 500: E },
  },
  {
    path: '/streams/{stream_id}',
    method: 'delete',
    statuses: { 200: 'StatusResponse', 204: null, 400: E, 401: E, 404: E, 422: E, 500: E },
  },
  { path: '/streams/{stream_id}/spectate', method: 'post', statuses: { 200: 'SpectateResponse', 400: E, 401: E, 404: E, 422: E, 500: E } },
  { path: '/streams/{stream_id}/info', method: 'get', statuses: { 200: 'StreamInfoResponse', 400: E, 401: E, 404: E, 422: E, 500: E } },
  {
    path: '/streams/{stream_id}/config/prompt',
    method: 'patch',
    request: 'PromptUpdateRequest',
    statuses: { 200: 'StreamConfigResponse', 400: E, 401: E, 404: E, 422: E, 500: E },
  },
  {
    path: '/streams/{stream_id}/feedback',
    method: 'post',
    request: 'FeedbackCreateRequest',
    statuses: { 200: 'StatusResponse', 400: E, 401: E, 422: E, 500: E },
  },
  { path: '/streams/feedback', method: 'get', statuses: { 200: '[FeedbackResponse]', 400: E, 401: E, 422: E, 500: E } },
];

/**
 * Statuses the gateway answers beyond the provider's list (each with the error body): 502/503/504
 * wherever the key is checked (upstream check failing, failed-auth budget, store, shutdown); on
 * create and keepalive 403 (the upstream refusing the key for that call), on create 410 (after the
 * sunset); on feedback 404 (unknown, ended or another account's stream).
 */
const GATEWAY_EXTRAS: Record<string, number[]> = {
  'post /streams': [403, 410, 502, 503, 504],
  'post /streams/{stream_id}/keepalive': [403, 502, 503, 504],
  'post /streams/{stream_id}/feedback': [404, 502, 503, 504],
};
const KEY_CHECK_EXTRAS = [502, 503, 504];

/** A schema's facts: each property's JSON types (`|`-joined; `any`: unconstrained), the required list, enums (const included), keywords. */
type SchemaFacts = {
  props: Record<string, string>;
  required: string[];
  enums?: Record<string, unknown[]>;
  keywords?: Record<string, Record<string, unknown>>;
};

/**
 * The provider's schemas, with its vendor and brand names through the brand: `livekit` is
 * `brand.room` (`LiveKitSourceConfig`: the vendor's name capitalised), `livekit_token`
 * `brand.roomTokenField`, `overshoot` `brand.backend`, `gemini` `brand.thirdPartyBackend`.
 */
function providerSchemas(b: Brand): Record<string, SchemaFacts> {
  const backends = [b.thirdPartyBackend, b.backend];
  const state = ['pending', 'active', 'idle'];
  return {
    StreamCreateRequest: {
      props: {
        source: 'object|null',
        webrtc: 'object|null',
        mode: 'string|null',
        processing: 'object',
        inference: 'object',
        client: 'object|null',
      },
      required: ['processing', 'inference'],
      enums: { mode: ['clip', 'frame'] },
    },
    WebRTCSourceConfig: {
      props: { type: 'string', sdp: 'string' },
      required: ['type', 'sdp'],
      enums: { type: ['webrtc'] },
      keywords: { sdp: { minLength: 1 } },
    },
    [`${b.room.charAt(0).toUpperCase()}${b.room.slice(1)}SourceConfig`]: {
      props: { type: 'string', url: 'string', token: 'string' },
      required: ['type', 'url', 'token'],
      enums: { type: [b.room] },
      keywords: { url: { minLength: 1 }, token: { minLength: 1 } },
    },
    NativeSourceConfig: { props: { type: 'string' }, required: ['type'], enums: { type: ['native'] } },
    WebRtcOffer: {
      props: { type: 'string', sdp: 'string' },
      required: ['type', 'sdp'],
      enums: { type: ['offer'] },
      keywords: { sdp: { minLength: 1 } },
    },
    WebRtcAnswer: {
      props: { type: 'string', sdp: 'string' },
      required: ['type', 'sdp'],
      enums: { type: ['answer'] },
      keywords: { sdp: { minLength: 1 } },
    },
    ClipProcessingConfig: {
      props: {
        target_fps: 'integer|null',
        sampling_ratio: 'number|null',
        fps: 'integer|null',
        clip_length_seconds: 'number',
        delay_seconds: 'number',
      },
      required: ['clip_length_seconds', 'delay_seconds'],
      keywords: { clip_length_seconds: { minimum: 0.1, maximum: 60 }, delay_seconds: { exclusiveMinimum: 0 } },
    },
    FrameProcessingConfig: {
      props: { interval_seconds: 'number' },
      required: ['interval_seconds'],
      keywords: { interval_seconds: { exclusiveMinimum: 0, maximum: 60 } },
    },
    StreamInferenceConfig: {
      props: { prompt: 'string', model: 'string', backend: 'string', output_schema_json: 'object|null', max_output_tokens: 'integer|null' },
      required: ['prompt', 'model'],
      enums: { backend: backends },
      keywords: { prompt: { minLength: 1 }, model: { minLength: 1 }, backend: { default: b.backend } },
    },
    StreamClientMeta: { props: { request_id: 'string|null' }, required: [] },
    StreamCreateResponse: {
      props: { stream_id: 'string', webrtc: 'object|null', lease: 'object|null', turn_servers: 'array|null', [b.room]: 'object|null' },
      required: ['stream_id'],
    },
    KeepaliveResponse: {
      props: {
        status: 'string',
        stream_id: 'string',
        ttl_seconds: 'integer',
        credits_remaining_cents: 'integer',
        cost_cents: 'number',
        seconds_charged: 'number',
        [b.roomTokenField]: 'string|null',
        state: 'string',
      },
      required: ['status', 'stream_id', 'ttl_seconds', 'credits_remaining_cents', 'cost_cents', 'seconds_charged', 'state'],
      enums: { status: ['ok'], state },
    },
    SpectateResponse: {
      props: { [b.room]: 'object' },
      required: [b.room],
      keywords: { [b.room]: { additionalProperties: { type: 'string' } } },
    },
    StreamInfoResponse: {
      props: {
        stream_id: 'string',
        source_type: 'string',
        state: 'string',
        uptime_seconds: 'number',
        fps: 'number',
        frame_width: 'integer',
        frame_height: 'integer',
        effective_width: 'integer',
        effective_height: 'integer',
        inferences_completed: 'integer',
        inferences_failed: 'integer',
        last_inference_latency_seconds: 'number',
      },
      required: [
        'stream_id',
        'source_type',
        'state',
        'uptime_seconds',
        'fps',
        'frame_width',
        'frame_height',
        'effective_width',
        'effective_height',
        'inferences_completed',
        'inferences_failed',
        'last_inference_latency_seconds',
      ],
      enums: { state },
    },
    PromptUpdateRequest: { props: { prompt: 'string' }, required: ['prompt'], keywords: { prompt: { minLength: 1 } } },
    StreamConfigResponse: {
      props: {
        id: 'string',
        stream_id: 'string',
        prompt: 'string',
        backend: 'string',
        model: 'string',
        output_schema_json: 'object|null',
        created_at: 'string|null',
        updated_at: 'string|null',
      },
      required: ['id', 'stream_id', 'prompt', 'backend', 'model', 'output_schema_json', 'created_at', 'updated_at'],
      enums: { backend: backends },
    },
    FeedbackCreateRequest: {
      props: { rating: 'integer', category: 'string', feedback: 'string' },
      required: ['rating', 'category'],
      keywords: { rating: { minimum: 0, maximum: 10 }, category: { minLength: 1 }, feedback: { default: '' } },
    },
    FeedbackResponse: {
      props: {
        id: 'string',
        stream_id: 'string',
        rating: 'integer',
        category: 'string',
        feedback: 'string',
        created_at: 'string|null',
        updated_at: 'string|null',
      },
      required: ['id', 'stream_id', 'rating', 'category', 'feedback', 'created_at', 'updated_at'],
    },
    StatusResponse: { props: { status: 'string' }, required: ['status'], enums: { status: ['ok'] } },
    ErrorResponse: { props: { error: 'string', request_id: 'string|null', details: 'any' }, required: ['error'] },
  };
}

/** Properties the gateway's schemas have beyond the provider's: the error's `message`. */
const GATEWAY_PROPERTIES: Record<string, string[]> = { ErrorResponse: ['message'] };

const PROVIDER_BRAND = brandOf({ brand: 'overshoot', brandAbbreviation: 'ovs', thirdPartyBackend: 'gemini', roomVendor: 'livekit' });

function resolve(doc: Doc, s: Schema): Schema {
  return s.$ref ? resolve(doc, doc.components.schemas[s.$ref.replace('#/components/schemas/', '')]!) : s;
}

function jsonTypeOf(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  return typeof v === 'number' ? (Number.isInteger(v) ? 'integer' : 'number') : typeof v;
}

/** A schema's JSON types through `$ref`, `anyOf` and `oneOf`, sorted; `any` when one branch takes anything. */
function typesOf(doc: Doc, schema: Schema): string {
  const collect = (raw: Schema): string[] => {
    const s = resolve(doc, raw);
    const branches = (s.anyOf ?? s.oneOf) as Schema[] | undefined;
    if (branches) return branches.flatMap(collect);
    if (s.type !== undefined) return ([] as string[]).concat(s.type as string | string[]);
    if ('const' in s) return [jsonTypeOf(s.const)];
    if (Array.isArray(s.enum)) return s.enum.map(jsonTypeOf);
    return ['any'];
  };
  const types = [...new Set(collect(schema))].sort();
  return types.includes('any') ? 'any' : types.join('|');
}

/** A schema's enum and const values through `$ref`, `anyOf` and `oneOf`, sorted (empty: none). */
function enumOf(doc: Doc, schema: Schema): unknown[] {
  const collect = (raw: Schema): unknown[] => {
    const s = resolve(doc, raw);
    const branches = (s.anyOf ?? s.oneOf) as Schema[] | undefined;
    return [
      ...(branches ? branches.flatMap(collect) : []),
      ...((s.enum as unknown[] | undefined) ?? []),
      ...('const' in s ? [s.const] : []),
    ];
  };
  return [...new Set(collect(schema))].sort();
}

const sorted = (xs: readonly unknown[]) => [...xs].sort();
const norm = (types: string) => types.split('|').sort().join('|');

/** Every provider operation and schema fact, checked on one document; returns the mismatches (empty when it matches). */
function providerMismatches(doc: Doc, brand: Brand): string[] {
  const out: string[] = [];
  const mediaSchema = (media: Media | undefined) => media?.schema;
  for (const want of PROVIDER_OPERATIONS) {
    const where = `${want.method.toUpperCase()} ${want.path}`;
    const op = doc.paths[want.path]?.[want.method];
    if (!op) {
      out.push(`${where}: missing`);
      continue;
    }
    if (JSON.stringify(op.security) !== JSON.stringify([{ 'API Key': [] }])) out.push(`${where}: security ${JSON.stringify(op.security)}`);
    if (want.request && mediaSchema(op.requestBody?.content['application/json'])?.$ref !== `#/components/schemas/${want.request}`) {
      out.push(`${where}: request body is not ${want.request}`);
    }
    const extras = GATEWAY_EXTRAS[`${want.method} ${want.path}`] ?? KEY_CHECK_EXTRAS;
    const expected = sorted([...Object.keys(want.statuses), ...extras.map(String)]);
    if (JSON.stringify(sorted(Object.keys(op.responses))) !== JSON.stringify(expected)) {
      out.push(
        `${where}: statuses ${sorted(Object.keys(op.responses)).join(',')}, want the provider's and the gateway's ${expected.join(',')}`,
      );
    }
    for (const [status, name] of Object.entries(want.statuses)) {
      const response = op.responses[status];
      if (!response) continue;
      const got = mediaSchema(response.content?.['application/json']);
      const array = name?.match(/^\[(\w+)\]$/)?.[1];
      const ok =
        name === null
          ? response.content === undefined
          : array
            ? got?.type === 'array' && (got.items as Schema | undefined)?.$ref === `#/components/schemas/${array}`
            : got?.$ref === `#/components/schemas/${name}`;
      if (!ok) out.push(`${where} ${status}: body is not ${name ?? 'empty'}`);
    }
  }
  for (const [name, want] of Object.entries(providerSchemas(brand))) {
    const schema = doc.components.schemas[name];
    if (!schema) {
      out.push(`${name}: missing`);
      continue;
    }
    const props = schema.properties ?? {};
    if (schema.type !== 'object') out.push(`${name}: not an object`);
    if (JSON.stringify(sorted(schema.required ?? [])) !== JSON.stringify(sorted(want.required))) {
      out.push(`${name}: required ${JSON.stringify(schema.required ?? [])}, want ${JSON.stringify(want.required)}`);
    }
    const unknown = Object.keys(props).filter((p) => !(p in want.props) && !(GATEWAY_PROPERTIES[name] ?? []).includes(p));
    if (unknown.length > 0) out.push(`${name}: properties the provider does not have: ${unknown.join(', ')}`);
    for (const [prop, types] of Object.entries(want.props)) {
      const p = props[prop];
      if (!p) {
        out.push(`${name}.${prop}: missing`);
        continue;
      }
      if (typesOf(doc, p) !== norm(types)) out.push(`${name}.${prop}: ${typesOf(doc, p)}, want ${norm(types)}`);
      const enums = sorted(want.enums?.[prop] ?? []);
      if (JSON.stringify(enumOf(doc, p)) !== JSON.stringify(enums))
        out.push(`${name}.${prop}: enum ${JSON.stringify(enumOf(doc, p))}, want ${JSON.stringify(enums)}`);
      for (const [k, v] of Object.entries(want.keywords?.[prop] ?? {})) {
        if (JSON.stringify(p[k]) !== JSON.stringify(v))
          out.push(`${name}.${prop}: ${k} ${JSON.stringify(p[k])}, want ${JSON.stringify(v)}`);
      }
    }
  }
  if (JSON.stringify(doc.servers) !== JSON.stringify([{ url: '/v0.2' }])) out.push(`servers ${JSON.stringify(doc.servers)}`);
  const scheme = doc.components.securitySchemes['API Key'] as { type?: string; scheme?: string } | undefined;
  if (scheme?.type !== 'http' || scheme.scheme !== 'bearer') out.push(`security scheme "API Key": ${JSON.stringify(scheme)}`);
  return out;
}

/** The OpenAPI 3.1 structure this document must have (the parts of the spec's schema it uses). */
const OPENAPI_31 = {
  $defs: {
    ref: { type: 'object', required: ['$ref'], properties: { $ref: { type: 'string', pattern: '^#/components/schemas/' } } },
    media: {
      type: 'object',
      required: ['schema'],
      properties: {
        schema: {
          anyOf: [
            { $ref: '#/$defs/ref' },
            { type: 'object', required: ['type', 'items'], properties: { type: { const: 'array' }, items: { $ref: '#/$defs/ref' } } },
          ],
        },
      },
    },
    content: { type: 'object', additionalProperties: { $ref: '#/$defs/media' } },
    response: {
      type: 'object',
      required: ['description'],
      properties: { description: { type: 'string' }, content: { $ref: '#/$defs/content' } },
      additionalProperties: false,
    },
    parameter: {
      type: 'object',
      required: ['name', 'in', 'schema'],
      properties: {
        name: { type: 'string' },
        in: { enum: ['path', 'query', 'header', 'cookie'] },
        required: { type: 'boolean' },
        schema: { type: 'object' },
      },
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
        requestBody: {
          type: 'object',
          required: ['content'],
          properties: { required: { type: 'boolean' }, content: { $ref: '#/$defs/content' } },
        },
        responses: {
          type: 'object',
          minProperties: 1,
          propertyNames: { pattern: '^([1-5][0-9X]{2}|default)$' },
          additionalProperties: { $ref: '#/$defs/response' },
        },
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
  let brand: Brand;
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  const validators = new Map<string, ValidateFunction>();

  /** The body schema the document names for a path, method and status: a component's validator, or an array of one. */
  function validatorFor(
    path: string,
    method: string,
    status: number,
  ): { name: string; validate: (body: unknown) => boolean; one: ValidateFunction } {
    const op = doc.paths[path]?.[method];
    expect(op).toBeDefined();
    const schema = op!.responses[String(status)]?.content?.['application/json']?.schema;
    if (!schema) throw new Error(`${method} ${path} does not document status ${status}`);
    const items = schema.type === 'array' ? (schema.items as Schema) : undefined;
    const name = (items ?? schema).$ref!.split('/').pop()!;
    const one = validators.get(name)!;
    return { name: items ? `[${name}]` : name, validate: items ? (b) => Array.isArray(b) && b.every((x) => one(x)) : (b) => one(b), one };
  }

  /** Validates a real response against the schema the document names for its path, method and status. */
  function check(path: string, method: string, res: { status: number; body: unknown }): void {
    const { name, validate, one } = validatorFor(path, method, res.status);
    if (!validate(res.body)) throw new Error(`${method} ${path} ${res.status} does not match ${name}: ${ajv.errorsText(one.errors)}`);
  }

  beforeAll(async () => {
    stack = await startStack({ deprecation: { sunset: '2026-12-31T00:00:00Z', link: 'https://docs.example.com/migrate' } });
    brand = brandOf(stack.cfg);
    const res = await fetch(`${stack.url}/v0.2/openapi.json`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(res.headers.get('deprecation')).toMatch(/^@\d+$/);
    doc = (await res.json()) as Doc;
    // Components refer to each other (`#/components/schemas/…`): compiled inside one resource.
    ajv.addSchema({ $id: 'openapi.json', components: { schemas: doc.components.schemas } });
    for (const name of Object.keys(doc.components.schemas))
      validators.set(name, ajv.getSchema(`openapi.json#/components/schemas/${name}`)!);
  });
  afterAll(() => stack.close());

  test('is an OpenAPI 3.1 document with every operation deprecated and every component a valid JSON Schema 2020-12', () => {
    const validate = ajv.compile(OPENAPI_31);
    expect(validate(doc) ? [] : validate.errors).toEqual([]);
    const ops = Object.values(doc.paths).flatMap((p) => Object.values(p));
    expect(ops.length).toBe(11);
    expect(ops.every((o) => o.deprecated === true)).toBe(true);
    // Paths are relative to the `/v0.2` server.
    expect(Object.keys(doc.paths).filter((p) => p.startsWith('/v0.2'))).toEqual([]);
    // Every $ref resolves.
    const refs = JSON.stringify(doc).match(/#\/components\/schemas\/\w+/g) ?? [];
    for (const r of refs) expect(doc.components.schemas).toHaveProperty(r.split('/').pop()!);
    expect([...validators.values()].every((v) => typeof v === 'function')).toBe(true);
    expect(validators.size).toBe(Object.keys(doc.components.schemas).length);
  });

  test("matches the provider's v0.2 document: operations, statuses, schemas, security scheme and servers", () => {
    expect(providerMismatches(doc, brand)).toEqual([]);
    // The same under the provider's own brand, whose names are the provider's literally.
    const provider = legacyOpenApi(PROVIDER_BRAND, { sunset: '2026-12-31T00:00:00Z', link: 'https://docs.example.com/migrate' }) as Doc;
    expect(providerMismatches(provider, PROVIDER_BRAND)).toEqual([]);
    const schemas = provider.components.schemas;
    expect(Object.keys(schemas.KeepaliveResponse!.properties!)).toContain('livekit_token');
    expect(schemas.SpectateResponse!.required).toEqual(['livekit']);
    expect(Object.keys(schemas.StreamCreateResponse!.properties!)).toContain('livekit');
    expect(enumOf(provider, schemas.StreamConfigResponse!.properties!.backend!)).toEqual(['gemini', 'overshoot']);
    expect(enumOf(provider, schemas.LivekitSourceConfig!.properties!.type!)).toEqual(['livekit']);
    expect(schemas.StreamInferenceConfig!.properties!.backend!.default).toBe('overshoot');
  });

  test('the request schemas accept what the router accepts and reject what it rejects', () => {
    const create = validators.get('StreamCreateRequest')!;
    expect(create(clipBody())).toBe(true);
    expect(create(frameBody({ interval_seconds: 2 }))).toBe(true);
    expect(create({ ...frameBody(), extra: 1 })).toBe(false);
    expect(create({ processing: { interval_seconds: 1 } })).toBe(false); // no inference
    expect(create({ ...frameBody(), source: { type: brand.room, url: 'wss://r', token: 't' } })).toBe(true);
    expect(create({ ...frameBody(), source: { type: brand.room, url: 'wss://r' } })).toBe(false);
    const feedback = validators.get('FeedbackCreateRequest')!;
    expect(feedback({ rating: 10, category: 'accuracy' })).toBe(true);
    expect(feedback({ rating: 2.5, category: 'accuracy' })).toBe(false);
    expect(feedback({ rating: 11, category: 'accuracy' })).toBe(false);
  });

  test('the stream info and spectate schemas take the provider-shaped bodies and tell integer from number', () => {
    const info = {
      stream_id: 's-1',
      source_type: 'native',
      state: 'active',
      uptime_seconds: 12.5,
      fps: 9.8,
      frame_width: 1920,
      frame_height: 1080,
      effective_width: 1280,
      effective_height: 720,
      inferences_completed: 4,
      inferences_failed: 0,
      last_inference_latency_seconds: 0.42,
    };
    const infoOk = validators.get('StreamInfoResponse')!;
    expect(infoOk(info)).toBe(true);
    expect(infoOk({ ...info, frame_width: 1920.5 })).toBe(false);
    expect(infoOk({ ...info, state: 'ended' })).toBe(false);
    const { fps: _fps, ...noFps } = info;
    expect(infoOk(noFps)).toBe(false);
    const spectate = validators.get('SpectateResponse')!;
    expect(spectate({ [brand.room]: { url: 'wss://r', token: 't' } })).toBe(true);
    expect(spectate({})).toBe(false);
    expect(spectate({ [brand.room]: { url: 1 } })).toBe(false);
  });

  test('real responses validate: create, keepalive, prompt, models, feedback, info, spectate, delete and legacy errors', async () => {
    const { url } = stack;
    const created = await http(url, 'POST', '/v0.2/streams', { body: frameBody({ interval_seconds: 5 }) });
    expect(created.status).toBe(201);
    check('/streams', 'post', created);
    expect(validators.get('KeepaliveResponse')!(created.body)).toBe(false); // the schemas are strict enough to tell bodies apart
    const id = (created.body as { stream_id: string }).stream_id;
    const path = (p: string) => `/streams/{stream_id}${p}`;

    const keepalive = await http(url, 'POST', `/v0.2/streams/${id}/keepalive`);
    check(path('/keepalive'), 'post', keepalive);
    // integer, as the provider types it
    expect(validators.get('KeepaliveResponse')!({ ...(keepalive.body as object), credits_remaining_cents: 1.5 })).toBe(false);
    check(path('/config/prompt'), 'patch', await http(url, 'PATCH', `/v0.2/streams/${id}/config/prompt`, { body: { prompt: 'Count' } }));
    check(
      path('/feedback'),
      'post',
      await http(url, 'POST', `/v0.2/streams/${id}/feedback`, { body: { rating: 5, category: 'accuracy', feedback: 'ok' } }),
    );
    check('/streams/feedback', 'get', await http(url, 'GET', '/v0.2/streams/feedback'));
    check('/models', 'get', await http(url, 'GET', '/v0.2/models'));
    const info = await http(url, 'GET', `/v0.2/streams/${id}/info`);
    expect(info.status).toBe(200);
    check(path('/info'), 'get', info);
    const spectate = await http(url, 'POST', `/v0.2/streams/${id}/spectate`);
    expect(spectate.status).toBe(200);
    check(path('/spectate'), 'post', spectate);
    // Another account's stream: 404, as the provider answers it.
    const foreign = await http(url, 'POST', `/v0.2/streams/${id}/keepalive`, { key: KEY_B });
    expect(foreign.status).toBe(404);
    check(path('/keepalive'), 'post', foreign);
    check(path(''), 'delete', await http(url, 'DELETE', `/v0.2/streams/${id}`));

    // Errors, all in the legacy shape.
    const unauthorized = await http(url, 'POST', '/v0.2/streams', { key: KEY_REVOKED, body: frameBody() });
    expect(unauthorized.status).toBe(401);
    check('/streams', 'post', unauthorized);
    const invalid = await http(url, 'POST', '/v0.2/streams', { body: frameBody({ interval_seconds: 'x' }) });
    expect(invalid.status).toBe(422);
    check('/streams', 'post', invalid);
    const malformed = await http(url, 'POST', '/v0.2/streams', { raw: '{"not json' });
    expect(malformed.status).toBe(400);
    check('/streams', 'post', malformed);
    const ended = await http(url, 'POST', `/v0.2/streams/${id}/keepalive`);
    expect(ended.status).toBe(404);
    check(path('/keepalive'), 'post', ended);
  });

  test('real responses validate: reinfer (200, 404, 410, 422) and /v0.2/healthz', async () => {
    const { url } = stack;
    const reinfer = '/chat/completions/clip';
    const created = await http(url, 'POST', '/v0.2/streams', { body: frameBody({ interval_seconds: 0.5 }) });
    const id = (created.body as { stream_id: string }).stream_id;
    const sock = await openResults(url, id, KEY);
    const [result] = await sock.waitFor(1, 20_000);
    sock.ws.close();
    const body = { result_id: result!.id, prompt: 'again', model: 'local/analyzer' };
    const ok = await reinferResult(url, body);
    expect(ok.status).toBe(200);
    check(reinfer, 'post', ok);
    expect(validators.get('ReinferRequest')!(body)).toBe(true);
    expect(validators.get('ReinferRequest')!({ ...body, extra: 1 })).toBe(false);
    check(reinfer, 'post', await http(url, 'POST', `/v0.2${reinfer}`, { key: KEY_B, body }));
    check(reinfer, 'post', await http(url, 'POST', `/v0.2${reinfer}`, { body: { ...body, prompt: '' } }));
    await http(url, 'DELETE', `/v0.2/streams/${id}`);
    const gone = await http(url, 'POST', `/v0.2${reinfer}`, { body });
    expect(gone.status).toBe(410);
    check(reinfer, 'post', gone);

    const health = await http(url, 'GET', '/v0.2/healthz', { key: null });
    const media = doc.paths['/healthz']!.get!.responses['200']!.content!['text/plain']!;
    expect(validators.get(media.schema.$ref!.split('/').pop()!)!(health.body)).toBe(true);
  }, 60_000);
});

/**
 * The OpenAPI 3.1 document of /v0.2, served at `/v0.2/openapi.json`. Request bodies come from the
 * zod schemas the router validates with (schema.ts); responses from the zod schemas below, which
 * test/gateway/openapi.test.ts holds to real gateway responses. zod 4's `z.toJSONSchema` emits JSON
 * Schema 2020-12, the dialect of OpenAPI 3.1. Every operation is marked `deprecated`.
 */
import { z } from 'zod';
import type { Brand } from '../../brand';
import type { DeprecationConfig } from '../../config';
import { clipProcessingSchema, createLegacySchemas, frameProcessingSchema } from './schema';

type JsonSchema = Record<string, unknown>;

/** Response bodies of /v0.2 (shapes of translate.ts's `toLegacy*` and of legacy errors). */
export function legacyResponseSchemas(brand: Brand) {
  const nullableString = z.string().nullable();
  const turnServer = z.strictObject({ urls: z.string(), username: z.string(), credential: z.string() });
  return {
    CreateStreamResponse: z.strictObject({
      stream_id: z.string(),
      webrtc: z.strictObject({ type: z.literal('answer'), sdp: z.string() }).nullable(),
      lease: z.strictObject({ ttl_seconds: z.number() }),
      turn_servers: z.array(turnServer).nullable(),
      [brand.room]: z.strictObject({ url: z.string(), token: z.string() }).nullable(),
    }),
    KeepaliveResponse: z.strictObject({
      status: z.literal('ok'),
      stream_id: z.string(),
      ttl_seconds: z.number(),
      credits_remaining_cents: z.number(),
      cost_cents: z.number(),
      seconds_charged: z.number(),
      state: z.enum(['pending', 'active', 'idle']),
      [brand.roomTokenField]: nullableString,
    }),
    ModelList: z.array(z.strictObject({ model: z.string(), ready: z.boolean(), status: z.enum(['ready', 'degraded', 'saturated', 'unavailable']) })),
    PromptResponse: z.strictObject({
      id: z.string(),
      stream_id: z.string(),
      prompt: z.string(),
      backend: z.string(),
      model: z.string(),
      output_schema_json: z.record(z.string(), z.unknown()).nullable(),
      created_at: z.string(),
      updated_at: z.string(),
    }),
    FeedbackList: z.array(
      z.strictObject({
        id: z.string(),
        stream_id: z.string(),
        rating: z.number(),
        category: z.string(),
        feedback: z.string(),
        created_at: z.string(),
        updated_at: z.string(),
      }),
    ),
    StatusOk: z.strictObject({ status: z.literal('ok') }),
    /** `GET /v0.2/healthz` (text/plain), as `/healthz`. */
    HealthOk: z.literal('ok'),
    ReinferResponse: z.strictObject({
      id: z.string(),
      model: z.string(),
      content: z.string(),
      finish_reason: nullableString,
      usage: z.strictObject({ prompt_tokens: z.number(), completion_tokens: z.number(), total_tokens: z.number() }).nullable(),
    }),
    /** Every /v0.2 error: `{error, message, request_id, details}` (docs/errors.md). */
    LegacyError: z.strictObject({ error: z.string(), message: z.string(), request_id: nullableString, details: z.unknown() }),
  };
}

/** The create body for documentation: the router's own pieces, with `processing` as clip or frame. */
function createRequestSchema(brand: Brand): z.ZodType {
  const s = createLegacySchemas(brand);
  return z.strictObject({
    source: s.source.nullish(),
    webrtc: z.strictObject({ type: z.literal('offer'), sdp: z.string().min(1) }).nullish().meta({ deprecated: true }),
    mode: z.enum(['clip', 'frame']).nullish(),
    processing: z.union([clipProcessingSchema, frameProcessingSchema]),
    inference: s.inference,
    client: z.strictObject({ request_id: z.string().nullish() }).nullish(),
  });
}

function jsonSchema(schema: z.ZodType, io: 'input' | 'output'): JsonSchema {
  const { $schema: _dialect, ...rest } = z.toJSONSchema(schema, { io, unrepresentable: 'any' }) as JsonSchema;
  return rest;
}

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const json = (name: string, description: string) => ({ description, content: { 'application/json': { schema: ref(name) } } });

/** Error statuses each operation can answer (docs/errors.md), all with the legacy error body. */
function errors(...statuses: number[]): Record<string, unknown> {
  const text: Record<number, string> = {
    400: 'Body is not JSON',
    401: 'Missing or invalid API key',
    402: 'Insufficient credits',
    403: 'The stream belongs to another account',
    404: 'Stream not found',
    410: 'The interface was retired (deprecation.afterSunset: refuse)',
    422: 'Validation error',
    429: 'Concurrent stream limit reached',
    502: 'Upstream error',
    503: 'Brownout, model unavailable, upstream unavailable or shutting down',
    504: 'Upstream timeout',
  };
  return Object.fromEntries(statuses.map((s) => [String(s), json('LegacyError', text[s] ?? 'Error')]));
}

export function legacyOpenApi(brand: Brand, deprecation: Pick<DeprecationConfig, 'sunset' | 'link'>): JsonSchema {
  const responses = legacyResponseSchemas(brand);
  const schemas: Record<string, JsonSchema> = {
    CreateStreamRequest: jsonSchema(createRequestSchema(brand), 'input'),
    PromptPatch: jsonSchema(createLegacySchemas(brand).promptPatch, 'input'),
    FeedbackRequest: jsonSchema(createLegacySchemas(brand).feedback, 'input'),
    ReinferRequest: jsonSchema(createLegacySchemas(brand).reinfer, 'input'),
  };
  for (const [name, schema] of Object.entries(responses)) schemas[name] = jsonSchema(schema, 'output');

  const streamId = { name: 'stream_id', in: 'path', required: true, schema: { type: 'string', pattern: '^[\\w-]{1,128}$' } };
  const body = (name: string) => ({ required: true, content: { 'application/json': { schema: ref(name) } } });
  const op = (summary: string, rest: Record<string, unknown>) => ({ summary, deprecated: true, security: [{ bearer: [] }], ...rest });
  return {
    openapi: '3.1.0',
    info: {
      title: 'Legacy live-video inference API (/v0.2)',
      version: '0.2',
      description: `Deprecated; turned off on ${deprecation.sunset}. Migrate to /v1beta: ${deprecation.link}`,
    },
    externalDocs: { description: 'Migration guide', url: deprecation.link },
    servers: [{ url: '/' }],
    paths: {
      '/v0.2/streams': {
        post: op('Create a stream', {
          requestBody: body('CreateStreamRequest'),
          responses: { '201': json('CreateStreamResponse', 'Stream created'), ...errors(400, 401, 402, 410, 422, 429, 502, 503, 504) },
        }),
      },
      '/v0.2/healthz': {
        get: op('Health check (as /healthz)', {
          security: [],
          responses: { '200': { description: 'The gateway answers', content: { 'text/plain': { schema: ref('HealthOk') } } } },
        }),
      },
      '/v0.2/chat/completions/clip': {
        post: op('Re-run inference on the frames behind a delivered result, with a new prompt (reinfer)', {
          description:
            'One chat completion with the caller\'s key on the frames of the result `result_id` (its clip or frame, on the stream clock). ' +
            'Only the stream\'s account finds the result: anyone else gets 404 `result_not_found`, as for an unknown id. A result whose frames are gone ' +
            'gets 410: `clip_dropped` (its stream ended) or `clip_evicted` (its frames aged out of the frame buffer). /v1beta: a chat completion on ' +
            '`svc://streams/{id}?start_timestamp_ms=…&end_timestamp_ms=…` (docs/migration.md).',
          requestBody: body('ReinferRequest'),
          responses: {
            '200': json('ReinferResponse', 'The completion'),
            ...errors(400, 401, 402, 422, 502, 503, 504),
            '404': json('LegacyError', 'No result with this id for this account (`result_not_found`)'),
            '410': json('LegacyError', 'The result\'s frames are gone: `clip_dropped` (stream ended) or `clip_evicted` (evicted)'),
          },
        }),
      },
      '/v0.2/models': {
        get: op('List models', { security: [], responses: { '200': json('ModelList', 'Models and readiness'), ...errors(502, 503, 504) } }),
      },
      '/v0.2/streams/feedback': {
        get: op('List feedback of the account', { responses: { '200': json('FeedbackList', 'Feedback entries'), ...errors(401) } }),
      },
      '/v0.2/streams/{stream_id}': {
        delete: op('End a stream', {
          parameters: [streamId],
          responses: { '200': json('StatusOk', 'Stream ended'), '204': { description: 'Already ended' }, ...errors(401, 403, 404) },
        }),
      },
      '/v0.2/streams/{stream_id}/keepalive': {
        post: op('Renew the lease', {
          parameters: [streamId],
          responses: { '200': json('KeepaliveResponse', 'Lease renewed'), ...errors(401, 402, 403, 404, 503) },
        }),
      },
      '/v0.2/streams/{stream_id}/config/prompt': {
        patch: op('Change the prompt', {
          parameters: [streamId],
          requestBody: body('PromptPatch'),
          responses: { '200': json('PromptResponse', 'Prompt updated'), ...errors(401, 403, 404, 422) },
        }),
      },
      '/v0.2/streams/{stream_id}/feedback': {
        post: op('Rate a stream', {
          parameters: [streamId],
          requestBody: body('FeedbackRequest'),
          responses: { '200': json('StatusOk', 'Feedback stored'), ...errors(401, 403, 404, 422) },
        }),
      },
    },
    components: { schemas, securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: 'API key' } } },
  };
}

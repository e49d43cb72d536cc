/**
 * The OpenAPI 3.1 document of /v0.2, served at `/v0.2/openapi.json`. It follows the provider's
 * published v0.2 document for every operation both have: `servers: [{url: "/v0.2"}]` with paths
 * relative to it, the `API Key` bearer scheme, each operation's statuses, and schemas under the
 * provider's names with its property names, JSON types (integer vs number), required lists and enums
 * (test/gateway/openapi.test.ts holds the facts). The gateway's own operations (models, health,
 * reinfer) and the statuses it answers beyond the provider's list are documented too.
 *
 * Request bodies come from the zod schemas the router validates with (schema.ts); responses from the
 * zod schemas below, which test/gateway/openapi.test.ts holds to real gateway responses. zod 4's
 * `z.toJSONSchema` emits JSON Schema 2020-12, the dialect of OpenAPI 3.1; a schema registered under a
 * component name becomes a `$ref` wherever another component uses it. Every operation is marked
 * `deprecated`.
 */
import { z } from 'zod';
import type { Brand } from '../../../brand';
import type { DeprecationConfig } from '../../../config';
import { clipProcessingSchema, createLegacySchemas, frameProcessingSchema, outputSchema } from './schema';

type JsonSchema = Record<string, unknown>;

/**
 * Response bodies of /v0.2 (shapes of responses.ts's `toLegacy*` and of legacy errors), named as in
 * the provider's document. Where the provider leaves a field out of `required` it is optional here
 * too, though the gateway always sends it.
 */
export function legacyResponseSchemas(brand: Brand) {
  const nullableString = z.string().nullable();
  const streamState = z.enum(['pending', 'active', 'idle']);
  const WebRtcAnswer = z.strictObject({ type: z.literal('answer'), sdp: z.string().min(1) });
  const turnServer = z.strictObject({ urls: z.string(), username: z.string(), credential: z.string() });
  const feedback = z.strictObject({
    id: z.string(),
    stream_id: z.string(),
    rating: z.int(),
    category: z.string(),
    feedback: z.string(),
    created_at: nullableString,
    updated_at: nullableString,
  });
  return {
    StreamCreateResponse: z.strictObject({
      stream_id: z.string(),
      webrtc: WebRtcAnswer.nullable().optional(),
      lease: z.strictObject({ ttl_seconds: z.int() }).nullable().optional(),
      turn_servers: z.array(turnServer).nullable().optional(),
      [brand.room]: z.strictObject({ url: z.string(), token: z.string() }).nullable().optional(),
    }),
    WebRtcAnswer,
    KeepaliveResponse: z.strictObject({
      status: z.literal('ok'),
      stream_id: z.string(),
      ttl_seconds: z.int(),
      credits_remaining_cents: z.int(),
      cost_cents: z.number(),
      seconds_charged: z.number(),
      state: streamState,
      [brand.roomTokenField]: nullableString.optional(),
    }),
    /** `POST /v0.2/streams/{id}/spectate`: a subscribe-only room grant (url + token) of a native stream. */
    SpectateResponse: z.strictObject({ [brand.room]: z.record(z.string(), z.string()) }),
    /** `GET /v0.2/streams/{id}/info`. */
    StreamInfoResponse: z.strictObject({
      stream_id: z.string(),
      source_type: z.string().describe(`Transport: native, webrtc or ${brand.room}`),
      state: streamState,
      uptime_seconds: z.number(),
      fps: z.number(),
      frame_width: z.int(),
      frame_height: z.int(),
      effective_width: z.int(),
      effective_height: z.int(),
      inferences_completed: z.int(),
      inferences_failed: z.int(),
      last_inference_latency_seconds: z.number(),
    }),
    StreamConfigResponse: z.strictObject({
      id: z.string(),
      stream_id: z.string(),
      prompt: z.string(),
      backend: createLegacySchemas(brand).parts.backend,
      model: z.string(),
      output_schema_json: z.record(z.string(), z.unknown()).nullable(),
      created_at: nullableString,
      updated_at: nullableString,
    }),
    /** One entry of `GET /v0.2/streams/feedback` (a bare array of them). */
    FeedbackResponse: feedback,
    StatusResponse: z.strictObject({ status: z.literal('ok') }),
    ModelList: z.array(
      z.strictObject({ model: z.string(), ready: z.boolean(), status: z.enum(['ready', 'degraded', 'saturated', 'unavailable']) }),
    ),
    /** `GET /v0.2/healthz` (text/plain), as `/healthz`. */
    HealthOk: z.literal('ok'),
    ReinferResponse: z.strictObject({
      id: z.string(),
      model: z.string(),
      content: z.string(),
      finish_reason: nullableString,
      usage: z.strictObject({ prompt_tokens: z.number(), completion_tokens: z.number(), total_tokens: z.number() }).nullable(),
    }),
    /**
     * Every /v0.2 error: `{error, message, request_id, details}` (docs/errors.md). The provider
     * requires only `error`, so the rest are optional here though always sent; `message` is the
     * gateway's addition.
     */
    ErrorResponse: z.strictObject({
      error: z.string(),
      message: z.string().optional(),
      request_id: nullableString.optional(),
      details: z.unknown().optional(),
    }),
  };
}

/** The request bodies (and their parts the provider names), from the router's own schemas. */
function legacyRequestSchemas(brand: Brand): Record<string, z.ZodType> {
  const s = createLegacySchemas(brand);
  const p = s.parts;
  const vendor = brand.room.charAt(0).toUpperCase() + brand.room.slice(1);
  return {
    // The router decides `processing` by the mode first; documented as clip or frame.
    StreamCreateRequest: z.strictObject({
      source: p.source.nullish(),
      webrtc: p.offer.nullish().meta({ deprecated: true }),
      mode: z.enum(['clip', 'frame']).nullish(),
      processing: z.union([clipProcessingSchema, frameProcessingSchema]),
      inference: p.inference,
      client: p.client.nullish(),
    }),
    WebRTCSourceConfig: p.webrtcSource,
    [`${vendor}SourceConfig`]: p.roomSource,
    NativeSourceConfig: p.nativeSource,
    WebRtcOffer: p.offer,
    ClipProcessingConfig: clipProcessingSchema,
    FrameProcessingConfig: frameProcessingSchema,
    StreamInferenceConfig: p.inference,
    StreamClientMeta: p.client,
    PromptUpdateRequest: s.promptPatch,
    FeedbackCreateRequest: s.feedback,
    ReinferRequest: s.reinfer,
  };
}

/** Each schema under its name, those used inside others as `$ref`s. */
function components(named: Record<string, z.ZodType>, io: 'input' | 'output'): Record<string, JsonSchema> {
  const registry = z.registry<{ id: string }>();
  for (const [id, schema] of Object.entries(named)) registry.add(schema, { id });
  const { schemas } = z.toJSONSchema(registry, {
    io,
    unrepresentable: 'any',
    uri: (id) => `#/components/schemas/${id}`,
    // A custom check has no JSON Schema of its own; an output schema is an object.
    override: (ctx) => {
      if (ctx.zodSchema === outputSchema) ctx.jsonSchema.type = 'object';
    },
  });
  return Object.fromEntries(
    Object.entries(schemas).map(([id, schema]) => {
      const { $schema: _dialect, $id: _id, ...rest } = schema as JsonSchema;
      return [id, rest];
    }),
  );
}

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const json = (name: string, description: string) => ({ description, content: { 'application/json': { schema: ref(name) } } });

/** What each error status means on this gateway (docs/errors.md); an operation may say it more precisely. */
const ERROR_TEXT: Record<number, string> = {
  400: 'Body is not JSON',
  401: 'Missing or invalid API key',
  402: 'Insufficient credits',
  403: 'The upstream refused this API key for this call',
  404: 'Stream not found or not owned by this API key',
  410: 'The interface was retired (deprecation.afterSunset: refuse)',
  422: 'Request validation error',
  429: 'Concurrent stream limit reached',
  500: 'Server error',
  502: 'Upstream error or unreachable',
  503: 'Upstream or store unavailable, failed-auth budget spent, or shutting down',
  504: 'Upstream timeout',
};

/** 404 of the operations that refuse an ended stream too. */
const ENDED_404 = 'Stream not found, ended, or not owned by this API key';

/** A provider status this gateway never answers for an operation without input to refuse. */
const NO_INPUT_422 = 'Request validation error (listed by the provider; this operation has no input for the gateway to refuse)';

/** Error statuses with the legacy error body; `says` overrides the text per status. */
function errors(statuses: readonly number[], says: Record<number, string> = {}): Record<string, unknown> {
  return Object.fromEntries(statuses.map((s) => [String(s), json('ErrorResponse', says[s] ?? ERROR_TEXT[s] ?? 'Error')]));
}

/**
 * Beyond the provider's list, every operation with a key check may answer 502/503/504: the key's
 * upstream check failing (unreachable, unavailable, timeout), the failed-auth budget, the store, or
 * a shutdown (503).
 */
const KEY_CHECK_EXTRAS = [502, 503, 504] as const;

export function legacyOpenApi(brand: Brand, deprecation: Pick<DeprecationConfig, 'sunset' | 'link'>): JsonSchema {
  const schemas = { ...components(legacyRequestSchemas(brand), 'input'), ...components(legacyResponseSchemas(brand), 'output') };

  const streamId = { name: 'stream_id', in: 'path', required: true, schema: { type: 'string', pattern: '^[\\w-]{1,128}$' } };
  const body = (name: string) => ({ required: true, content: { 'application/json': { schema: ref(name) } } });
  const op = (summary: string, rest: Record<string, unknown>) => ({ summary, deprecated: true, security: [{ 'API Key': [] }], ...rest });
  return {
    openapi: '3.1.0',
    info: {
      title: 'Legacy live-video inference API (/v0.2)',
      version: '0.2',
      description: `Deprecated; turned off on ${deprecation.sunset}. Migrate to /v1beta: ${deprecation.link}`,
    },
    externalDocs: { description: 'Migration guide', url: deprecation.link },
    servers: [{ url: '/v0.2' }],
    paths: {
      '/streams': {
        post: op('Create stream', {
          requestBody: body('StreamCreateRequest'),
          responses: {
            '201': json('StreamCreateResponse', 'Stream created'),
            ...errors([400, 401, 402, 422, 429, 500]),
            // The gateway's own: the upstream refusing the key for a create, the sunset, upstream failures,
            // and 503 for a brownout or a model that is not ready too.
            ...errors([403, 410, ...KEY_CHECK_EXTRAS], {
              503: `Brownout, model unavailable or saturated; ${ERROR_TEXT[503]!.toLowerCase()}`,
            }),
          },
        }),
      },
      '/healthz': {
        get: op('Health check (as /healthz)', {
          security: [],
          responses: { '200': { description: 'The gateway answers', content: { 'text/plain': { schema: ref('HealthOk') } } } },
        }),
      },
      '/chat/completions/clip': {
        post: op('Re-run inference on the frames behind a delivered result, with a new prompt (reinfer)', {
          description:
            "One chat completion with the caller's key on the frames of the result `result_id` (its clip or frame, on the stream clock). " +
            "Only the stream's account finds the result: anyone else gets 404 `result_not_found`, as for an unknown id. A result whose frames are gone " +
            'gets 410: `clip_dropped` (its stream ended) or `clip_evicted` (its frames aged out of the frame buffer). /v1beta: a chat completion on ' +
            `\`${brand.scheme}://streams/{id}?start_timestamp_ms=…&end_timestamp_ms=…\` (docs/migration.md).`,
          requestBody: body('ReinferRequest'),
          responses: {
            '200': json('ReinferResponse', 'The completion'),
            ...errors([400, 401, 402, 422, 502, 503, 504]),
            '404': json('ErrorResponse', 'No result with this id for this account (`result_not_found`)'),
            '410': json('ErrorResponse', "The result's frames are gone: `clip_dropped` (stream ended) or `clip_evicted` (evicted)"),
          },
        }),
      },
      '/models': {
        get: op('List models', {
          security: [],
          responses: { '200': json('ModelList', 'Models and readiness'), ...errors([502, 503, 504]) },
        }),
      },
      '/streams/feedback': {
        get: op('List feedback', {
          description:
            'The account\'s feedback, a bare array; `limit` and `cursor` page it, the next page named in `Link: <…>; rel="next"` and `X-Next-Cursor`.',
          parameters: [
            { name: 'limit', in: 'query', required: false, schema: { type: 'integer', minimum: 1 } },
            { name: 'cursor', in: 'query', required: false, schema: { type: 'string', pattern: '^\\d{1,16}$' } },
          ],
          responses: {
            '200': {
              description: 'Feedback entries',
              content: { 'application/json': { schema: { type: 'array', items: ref('FeedbackResponse') } } },
            },
            ...errors([400, 401, 422, 500], { 422: 'Bad `limit` or `cursor`' }),
            ...errors(KEY_CHECK_EXTRAS),
          },
        }),
      },
      '/streams/{stream_id}': {
        delete: op('Close stream', {
          parameters: [streamId],
          responses: {
            '200': json('StatusResponse', 'Stream closed'),
            '204': { description: 'Stream was already closed' },
            ...errors([400, 401, 404, 422, 500], { 422: NO_INPUT_422 }),
            ...errors(KEY_CHECK_EXTRAS),
          },
        }),
      },
      '/streams/{stream_id}/keepalive': {
        post: op('Keepalive', {
          parameters: [streamId],
          responses: {
            '200': json('KeepaliveResponse', 'Lease renewed, credits charged'),
            ...errors([400, 401, 402, 404, 422, 500], {
              402: 'Insufficient credits: the lease is not renewed, the stream ends when it lapses',
              404: ENDED_404,
              422: NO_INPUT_422,
            }),
            // The gateway's own: the upstream refusing the key for the renewal, upstream failures.
            ...errors([403, ...KEY_CHECK_EXTRAS]),
          },
        }),
      },
      '/streams/{stream_id}/spectate': {
        post: op('Spectate stream', {
          description: `A subscribe-only ${brand.room} grant (url + token) to watch a native stream's video; call again for a fresh token.`,
          parameters: [streamId],
          responses: {
            '200': json('SpectateResponse', 'Spectator grant'),
            ...errors([400, 401, 404, 422, 500], {
              400: 'Body is not JSON, or the stream does not use native transport',
              422: NO_INPUT_422,
            }),
            ...errors(KEY_CHECK_EXTRAS),
          },
        }),
      },
      '/streams/{stream_id}/info': {
        get: op('Stream info', {
          description: 'State, perceived fps, resolution and inference counts of a stream.',
          parameters: [streamId],
          responses: {
            '200': json('StreamInfoResponse', 'Stream info'),
            ...errors([400, 401, 404, 422, 500], { 422: NO_INPUT_422 }),
            ...errors(KEY_CHECK_EXTRAS),
          },
        }),
      },
      '/streams/{stream_id}/config/prompt': {
        patch: op('Update prompt', {
          parameters: [streamId],
          requestBody: body('PromptUpdateRequest'),
          responses: {
            '200': json('StreamConfigResponse', 'Prompt updated'),
            ...errors([400, 401, 404, 422, 500], { 404: ENDED_404 }),
            ...errors(KEY_CHECK_EXTRAS),
          },
        }),
      },
      '/streams/{stream_id}/feedback': {
        post: op('Submit feedback', {
          parameters: [streamId],
          requestBody: body('FeedbackCreateRequest'),
          responses: {
            '200': json('StatusResponse', 'Feedback stored'),
            ...errors([400, 401, 422, 500], { 422: 'Request validation error, or the feedback limit of the stream or account reached' }),
            // The gateway's own: an unknown, ended or other account's stream.
            ...errors([404, ...KEY_CHECK_EXTRAS], { 404: ENDED_404 }),
          },
        }),
      },
    },
    components: {
      schemas,
      securitySchemes: {
        'API Key': { type: 'http', scheme: 'bearer', description: "Your API key in the Authorization header as 'Bearer <api_key>'" },
      },
    },
  };
}

/**
 * The chat-completion request of the contract: zod validation (unknown fields accepted) plus the
 * stream references inside its parts, normalised into what completions needs. Every problem found
 * is reported in one 422 validation body, each with its `loc` in the request body.
 */
import { z } from 'zod';
import type { ValidationDetail } from '../lib/errors';
import { streamError, validationError } from '../lib/errors';
import type { ResponseFormat } from './models/backend';
import { isImageUrl, parseImageUrl } from './images';
import type { ImageSource } from './images';
import { parseReference } from './references';
import type { StreamReference } from './references';

export type RequestPart =
  | { type: 'text'; text: string }
  | { type: 'reference'; ref: StreamReference; loc: string[] }
  /** An `image_url` with a data or http(s) URL (./images.ts). */
  | { type: 'image'; source: ImageSource; loc: string[] };

export interface CompletionRequest {
  model: string;
  messages: { role: string; parts: RequestPart[] }[];
  /** max_completion_tokens, else its legacy alias max_tokens. */
  maxOutputTokens?: number;
  stream: boolean;
  includeUsage: boolean;
  responseFormat?: ResponseFormat;
  /** Prompt-cache key. */
  threadId?: string;
  tokensPerFrame: number;
  tools?: unknown[];
  toolChoice?: unknown;
  parallelToolCalls?: boolean;
}

export interface RequestParserOptions {
  /** Reference scheme (`brand.scheme`). */
  scheme: string;
  /** Name of the per-request per-frame token budget field. */
  tokensPerFrameField: string;
  defaultTokensPerFrame: number;
  /** Hosts `image_url` http(s) URLs may be fetched from (`emulator.imageFetch.allowedHosts`). */
  imageAllowedHosts?: readonly string[];
  /**
   * `provider`: a repeated query key or two anchors of one kind is the provider's 400
   * `query_param_invalid` (its error page), not the contract's 422 validation error.
   */
  dialect?: 'contract' | 'provider';
}

/** Reference problems the provider answers with its own 400 `query_param_invalid`. */
const QUERY_PARAM_PROBLEMS = new Set(['duplicate_parameter', 'multiple_anchors']);

const positiveInt = z.number().int().positive();

const partSchema = z.discriminatedUnion(
  'type',
  [
    z.looseObject({ type: z.literal('text'), text: z.string() }),
    z.looseObject({ type: z.literal('image_url'), image_url: z.looseObject({ url: z.string() }) }),
    z.looseObject({ type: z.literal('video_url'), video_url: z.looseObject({ url: z.string() }) }),
  ],
  { error: 'a content part must have type text, image_url or video_url' },
);

const messageSchema = z
  .looseObject({
    role: z.enum(['system', 'developer', 'user', 'assistant', 'tool']),
    content: z.union([z.string(), z.array(partSchema).min(1)]).nullish(),
  })
  .superRefine((m, c) => {
    // Only an assistant turn (carrying tool calls) may come without content, as in OpenAI's API.
    if ((m.content === null || m.content === undefined) && m.role !== 'assistant') {
      c.addIssue({ code: 'custom', path: ['content'], message: 'content is required (a string or an array of parts)' });
    }
  });

const responseFormatSchema = z.discriminatedUnion(
  'type',
  [
    z.looseObject({ type: z.literal('text') }),
    z.looseObject({ type: z.literal('json_object') }),
    z.looseObject({
      type: z.literal('json_schema'),
      json_schema: z.looseObject({
        name: z.string().min(1),
        schema: z.record(z.string(), z.unknown()),
        strict: z.boolean().nullish(),
      }),
    }),
  ],
  { error: 'response_format.type must be text, json_object or json_schema' },
);

const requestSchema = z.looseObject({
  model: z.string().min(1),
  messages: z.array(messageSchema).min(1),
  max_completion_tokens: positiveInt.nullish(),
  max_tokens: positiveInt.nullish(),
  stream: z.boolean().nullish(),
  stream_options: z.looseObject({ include_usage: z.boolean().nullish() }).nullish(),
  response_format: responseFormatSchema.nullish(),
  tools: z.array(z.unknown()).nullish(),
  tool_choice: z.unknown().optional(),
  parallel_tool_calls: z.boolean().nullish(),
  thread_id: z.string().min(1).max(512).nullish(),
});

type Issue = z.core.$ZodIssue;

/**
 * zod reports a failed union at the union itself; the useful problem is inside the branch that got
 * furthest (e.g. content is an array whose part 2 lacks a url), so unions are expanded into it.
 */
function leafIssues(issue: Issue, base: PropertyKey[] = []): { path: PropertyKey[]; issue: Issue }[] {
  const path = [...base, ...issue.path];
  if (issue.code === 'invalid_union' && issue.errors.length > 0) {
    const depth = (branch: Issue[]) => Math.max(...branch.map((i) => i.path.length));
    const best = issue.errors.reduce((a, b) => (depth(b) > depth(a) ? b : a));
    if (best.length > 0 && depth(best) > 0) return best.flatMap((i) => leafIssues(i, path));
  }
  return [{ path, issue }];
}

function zodDetails(error: z.ZodError): ValidationDetail[] {
  return error.issues
    .flatMap((i) => leafIssues(i))
    .map(({ path, issue }) => ({ loc: ['body', ...path.map(String)], msg: issue.message, type: issue.code }));
}

/** Builds the parser once per router; the returned function throws a 422 validation error. */
export function completionRequestParser(opts: RequestParserOptions): (body: unknown) => CompletionRequest {
  // The budget field's name is configuration, so it is checked beside the static schema.
  const tpfSchema = z.looseObject({ [opts.tokensPerFrameField]: positiveInt.nullish() });
  return (body) => {
    if (typeof body !== 'object' || body === null || Array.isArray(body)) {
      throw validationError('Request body must be a JSON object', [{ loc: ['body'], msg: 'expected a JSON object', type: 'model_type' }]);
    }
    const parsed = requestSchema.safeParse(body);
    const tpfParsed = tpfSchema.safeParse(body);
    if (!parsed.success || !tpfParsed.success) {
      const details = [...(parsed.success ? [] : zodDetails(parsed.error)), ...(tpfParsed.success ? [] : zodDetails(tpfParsed.error))];
      throw validationError(`Invalid chat completion request: ${details[0]?.loc.join('.')}: ${details[0]?.msg}`, details);
    }
    const b = parsed.data;
    const problems: ValidationDetail[] = [];
    const messages = b.messages.map((m, mi) => {
      const content = m.content;
      if (typeof content === 'string') return { role: m.role, parts: [{ type: 'text' as const, text: content }] };
      const parts: RequestPart[] = [];
      (content ?? []).forEach((p, pi) => {
        if (p.type === 'text') {
          parts.push({ type: 'text', text: p.text });
          return;
        }
        const field = p.type;
        const url = p.type === 'image_url' ? p.image_url.url : p.video_url.url;
        const loc = ['body', 'messages', String(mi), 'content', String(pi), field, 'url'];
        if (field === 'image_url' && isImageUrl(url)) {
          const img = parseImageUrl(url, loc, opts.imageAllowedHosts ?? []);
          if (img.ok) parts.push({ type: 'image', source: img.value, loc });
          else problems.push(...img.problems);
          return;
        }
        const r = parseReference(url, field === 'image_url' ? 'image' : 'video', opts.scheme, loc);
        if (r.ok) parts.push({ type: 'reference', ref: r.value, loc });
        else problems.push(...r.problems);
      });
      return { role: m.role, parts };
    });
    const queryProblem = opts.dialect === 'provider' ? problems.find((p) => QUERY_PARAM_PROBLEMS.has(p.type)) : undefined;
    if (queryProblem) throw streamError(400, 'query_param_invalid', `Invalid stream reference: ${queryProblem.msg}`);
    if (problems.length) {
      throw validationError(`Invalid ${problems[0]!.loc.includes('image_url') ? 'image_url' : 'video_url'}: ${problems[0]!.msg}`, problems);
    }

    const rf = b.response_format;
    const responseFormat: ResponseFormat | undefined =
      rf?.type === 'json_schema'
        ? {
            type: 'json_schema',
            name: rf.json_schema.name,
            schema: rf.json_schema.schema,
            ...(typeof rf.json_schema.strict === 'boolean' ? { strict: rf.json_schema.strict } : {}),
          }
        : rf?.type === 'json_object'
          ? { type: 'json_object' }
          : undefined;
    const maxOutputTokens = b.max_completion_tokens ?? b.max_tokens ?? undefined;
    const tpf = tpfParsed.data[opts.tokensPerFrameField] as number | null | undefined;
    return {
      model: b.model,
      messages,
      ...(maxOutputTokens !== undefined ? { maxOutputTokens } : {}),
      stream: b.stream ?? false,
      includeUsage: b.stream_options?.include_usage ?? false,
      ...(responseFormat ? { responseFormat } : {}),
      ...(b.thread_id ? { threadId: b.thread_id } : {}),
      tokensPerFrame: tpf ?? opts.defaultTokensPerFrame,
      ...(b.tools ? { tools: b.tools } : {}),
      ...(b.tool_choice !== undefined && b.tool_choice !== null ? { toolChoice: b.tool_choice } : {}),
      ...(typeof b.parallel_tool_calls === 'boolean' ? { parallelToolCalls: b.parallel_tool_calls } : {}),
    };
  };
}

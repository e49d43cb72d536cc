/** Pure verdicts on upstream answers: each returns the problems found (empty: what the gateway reads is there). */
import type { Brand } from '../brand';
import { isRecord } from '../lib/is-record';
import { UpstreamError } from '../upstream/client';
import type { ChatCompletionResponse, CreateStreamResponse, Stream } from '../upstream/client';
import { describeBody } from '../upstream/errors';
import { OUTPUT_CAP } from './cost';
import { UUID_RE, describe, problem, shapeProblems } from './shapes';

/** A check's outcome: its problems (none = pass), a detail for the table, or why it could not be judged. */
export interface Finding {
  problems: string[];
  detail?: string;
  skip?: string;
}

/** An error in one line: status and code of an upstream answer, else the message. */
export function errorText(err: unknown): string {
  if (err instanceof UpstreamError) {
    if (err.kind !== 'http') return err.message;
    return `HTTP ${err.status} ${err.code}: ${err.message}`;
  }
  return err instanceof Error ? err.message : String(err);
}

export function createProblems(c: CreateStreamResponse, brand: Brand): string[] {
  const problems = [
    ...shapeProblems(c, { id: 'string', state: 'string', publish: 'object', expires_at_ms: 'int', ttl_seconds: 'int' }),
    ...problem(typeof c.id !== 'string' || UUID_RE.test(c.id), `id should be a UUID, got ${describe(c.id)}`),
    ...problem(c.state === undefined || c.state === 'active', `state should be "active", got ${describe(c.state)}`),
  ];
  if (isRecord(c.publish)) {
    problems.push(...shapeProblems(c.publish, { type: 'string', url: 'string', token: 'string' }, 'publish.'));
    problems.push(
      ...problem(
        c.publish.type === undefined || c.publish.type === brand.room,
        `publish.type should be ${JSON.stringify(brand.room)} (the room vendor setting), got ${describe(c.publish.type)}`,
      ),
    );
    problems.push(
      ...problem(
        typeof c.publish.url !== 'string' || /^wss?:\/\//.test(c.publish.url),
        `publish.url should be ws(s)://, got ${describe(c.publish.url)}`,
      ),
    );
  }
  return problems;
}

export function readProblems(s: Stream, id: string): string[] {
  const problems = [
    ...shapeProblems(s, {
      id: 'string',
      state: 'string',
      created_at_ms: 'int',
      expires_at_ms: 'int',
      ttl_seconds: 'int',
      last_frame_at_ms: 'int|null',
      first_frame_at_ms: 'int|null',
      last_frame_index: 'int|null',
      stream_time_ms: 'number|null',
    }),
    ...problem(s.id === id, `id should be ${id}, got ${describe(s.id)}`),
    ...problem(s.state === 'active', `state should be "active", got ${describe(s.state)}`),
  ];
  // Before the first frame every frame field is null (the contract's rule 1).
  if (s.last_frame_at_ms === null) {
    for (const f of ['first_frame_at_ms', 'last_frame_index', 'first_available_frame_at_ms', 'first_available_frame_index'] as const) {
      problems.push(...problem(s[f] === null || s[f] === undefined, `${f} should be null before the first frame, got ${describe(s[f])}`));
    }
  }
  return problems;
}

/** Problems of a completion response: the fields the gateway reads, and usage that adds up within the cap. */
export function completionProblems(r: ChatCompletionResponse): string[] {
  const problems = [
    ...shapeProblems(r, { id: 'string', object: 'string', created: 'int', model: 'string', choices: 'array', usage: 'object' }),
    ...problem(r.object === 'chat.completion', `object should be "chat.completion", got ${describe(r.object)}`),
  ];
  const choice: unknown = Array.isArray(r.choices) ? r.choices[0] : undefined;
  problems.push(...shapeProblems(choice, { index: 'int', message: 'object', finish_reason: 'string|null' }, 'choices[0].'));
  if (isRecord(choice)) {
    problems.push(...shapeProblems(choice.message, { role: 'string', content: 'string' }, 'choices[0].message.'));
  }
  const usage = r.usage as unknown;
  problems.push(...shapeProblems(usage, { prompt_tokens: 'int', completion_tokens: 'int', total_tokens: 'int' }, 'usage.'));
  if (isRecord(usage) && problems.length === 0) {
    const u = r.usage;
    problems.push(
      ...problem(u.total_tokens === u.prompt_tokens + u.completion_tokens, 'usage.total_tokens is not prompt_tokens + completion_tokens'),
    );
    problems.push(...problem(u.prompt_tokens > 0, 'usage.prompt_tokens is 0 for a request with frames'));
    problems.push(
      ...problem(
        u.completion_tokens <= OUTPUT_CAP,
        `usage.completion_tokens ${u.completion_tokens} exceeds max_completion_tokens ${OUTPUT_CAP}`,
      ),
    );
  }
  return problems;
}

/** An error probe's verdict: one of `statuses`, the nested shape, and `code` in it. */
export function expectStreamError(err: unknown, statuses: number[], code: string): { problems: string[]; detail: string } {
  if (err === undefined) return { problems: ['the request was answered (200)'], detail: '' };
  if (!(err instanceof UpstreamError) || err.kind !== 'http') return { problems: [errorText(err)], detail: '' };
  const parsed = describeBody(err.body);
  const problems = [
    ...problem(statuses.includes(err.status), `expected HTTP ${statuses.join(' or ')}, got ${err.status}`),
    ...problem(parsed.stream, `the body is not {detail: {error: {code, message}}}: ${describe(err.body)}`),
    ...problem(!parsed.stream || parsed.code === code, `detail.error.code should be ${code}, got ${describe(parsed.code)}`),
  ];
  return { problems, detail: `HTTP ${err.status} ${parsed.code ?? ''}`.trim() };
}

/**
 * Which reading of the statuses an upstream answers with, where the contract and the provider's
 * pages disagree: the contract's 422s, or the provider's 409 / 410 / 400 `query_param_invalid`. The
 * gateway turns either into one error result of the tick and the stream goes on.
 */
export function readingOf(err: unknown): string {
  if (!(err instanceof UpstreamError) || err.kind !== 'http') return 'reading: unknown';
  if (err.status === 422) return 'reading: the contract (422)';
  if (err.status === 409 || err.status === 410 || err.status === 400) return `reading: the provider's pages (${err.status})`;
  return `reading: neither (${err.status})`;
}

/** A repeated query key: the contract's 422 validation error, or the provider's 400 `query_param_invalid`. */
export function repeatedKeyVerdict(err: unknown): Finding {
  if (err === undefined) return { problems: ['the request was answered (200)'] };
  if (!(err instanceof UpstreamError) || err.kind !== 'http') return { problems: [errorText(err)] };
  const body = err.body;
  if (err.status === 422) {
    const ok = isRecord(body) && body.error === 'validation_error';
    return {
      problems: problem(ok, `a 422 should be {error: "validation_error", …}, got ${describe(body)}`),
      detail: `HTTP 422; ${readingOf(err)}`,
    };
  }
  if (err.status === 400)
    return { ...expectStreamError(err, [400], 'query_param_invalid'), detail: `HTTP 400 query_param_invalid; ${readingOf(err)}` };
  return { problems: [`expected HTTP 422 or 400, got ${err.status}`], detail: readingOf(err) };
}

export function parseLenient(text: string): unknown {
  if (text === '') return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

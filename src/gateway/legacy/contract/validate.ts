/**
 * Legacy /v0.2 validation errors. The service the gateway replaces answered validation failures
 * with FastAPI/pydantic-style details, so zod issues are rendered in that vocabulary:
 * `{error: 'validation_error', message, request_id, details: [{loc: ['body', ...], msg, type}]}`.
 *
 * `type` values (stable, listed here once): missing, extra_forbidden, string_type, int_type,
 * float_type, bool_type, model_type (object expected), dict_type (free-form object expected),
 * list_type, greater_than, greater_than_equal, less_than, less_than_equal, string_too_short,
 * string_too_long, literal_error, value_error (cross-field rules), json_invalid (unparseable body).
 */
import type { z } from 'zod';
import { ServiceError, type ValidationDetail } from '../../../lib/errors';
import { isRecord } from '../../../lib/is-record';

/**
 * Message the schemas give every non-integer input of an integer field: zod reports a string sent to
 * `z.int()` as "expected number", and this marker keeps such issues `int_type`.
 */
export const INTEGER_EXPECTED = 'Input should be a valid integer';

/** At most this many issues are spelled out in `message`; all are in `details`. */
const MESSAGE_ISSUES = 3;

/** A legacy-shaped error: `{error: code, message, request_id, details}`. */
export function legacyError(status: number, code: string, message: string, details?: unknown): ServiceError {
  return new ServiceError(status, code, message, { shape: 'legacy', details: details ?? null });
}

/**
 * The request id a legacy response carries: the client's `client.request_id` when the body holds a
 * non-empty string there (read even from an otherwise invalid body), else `fallback`.
 */
export function legacyRequestId(body: unknown, fallback: string): string {
  const client = isRecord(body) ? body.client : undefined;
  const id = isRecord(client) ? client.request_id : undefined;
  return typeof id === 'string' && id.length > 0 ? id : fallback;
}

/**
 * Request id carried by an error thrown from `parseLegacy` (or `fallback` for any other error).
 * Renderers call `err.toLegacyBody(legacyErrorRequestId(err, fallback))`.
 */
export function legacyErrorRequestId(err: ServiceError, fallback: string | null): string | null {
  const id = err.options.extra?.request_id;
  return typeof id === 'string' ? id : fallback;
}

/** A 422 legacy validation error; `requestId` travels in `options.extra.request_id`. */
export function legacyValidationError(details: ValidationDetail[], requestId: string | null, message?: string): ServiceError {
  return new ServiceError(422, 'validation_error', message ?? summarize(details), {
    shape: 'legacy',
    details,
    extra: { request_id: requestId },
  });
}

/** Body that was not JSON at all (400, contract: "400 invalid body"). */
export function legacyJsonInvalid(reason: string, requestId: string | null): ServiceError {
  const msg = `Invalid JSON: ${reason}`;
  return new ServiceError(400, 'invalid_body', msg, {
    shape: 'legacy',
    details: [{ loc: ['body'], msg, type: 'json_invalid' }],
    extra: { request_id: requestId },
  });
}

/**
 * Parses a legacy body or throws a 422 legacy ServiceError. `requestId` is the generated id used when
 * the body does not carry `client.request_id`.
 */
export function parseLegacy<T>(schema: z.ZodType<T, unknown>, body: unknown, requestId: string): T {
  const result = schema.safeParse(body, { reportInput: true });
  if (result.success) return result.data;
  throw legacyValidationError(toLegacyDetails(result.error.issues), legacyRequestId(body, requestId));
}

/** Zod issues → pydantic-style details (`loc` starts with `body`; unknown keys give one detail each). */
export function toLegacyDetails(issues: readonly z.core.$ZodIssue[]): ValidationDetail[] {
  const out: ValidationDetail[] = [];
  for (const issue of issues) {
    const loc = ['body', ...issue.path.map(String)];
    if (issue.code === 'unrecognized_keys') {
      for (const key of issue.keys) out.push({ loc: [...loc, key], msg: 'Extra inputs are not permitted', type: 'extra_forbidden' });
      continue;
    }
    out.push({ loc, ...describe(issue) });
  }
  return out;
}

function describe(issue: z.core.$ZodIssue): { msg: string; type: string } {
  const input = (issue as { input?: unknown }).input;
  switch (issue.code) {
    case 'invalid_type':
      if (input === undefined) return { msg: 'Field required', type: 'missing' };
      return typeMismatch(issue.message === INTEGER_EXPECTED ? 'int' : issue.expected, input);
    case 'too_small':
      if (issue.origin === 'string') {
        const n = Number(issue.minimum);
        return { msg: `String should have at least ${n} character${n === 1 ? '' : 's'}`, type: 'string_too_short' };
      }
      return issue.inclusive
        ? { msg: `Input should be greater than or equal to ${issue.minimum}`, type: 'greater_than_equal' }
        : { msg: `Input should be greater than ${issue.minimum}`, type: 'greater_than' };
    case 'too_big':
      if (issue.origin === 'string') {
        const n = Number(issue.maximum);
        return { msg: `String should have at most ${n} character${n === 1 ? '' : 's'}`, type: 'string_too_long' };
      }
      return issue.inclusive
        ? { msg: `Input should be less than or equal to ${issue.maximum}`, type: 'less_than_equal' }
        : { msg: `Input should be less than ${issue.maximum}`, type: 'less_than' };
    case 'invalid_value':
      if (input === undefined) return { msg: 'Field required', type: 'missing' };
      return { msg: `Input should be ${quoteList(issue.values)}`, type: 'literal_error' };
    case 'invalid_union': {
      // A discriminated union (source.type) whose tag is absent or unknown.
      const tagged = issue as { discriminator?: string; options?: unknown[] };
      if (tagged.discriminator !== undefined) {
        const present = isRecord(input) && input[tagged.discriminator] !== undefined;
        if (!present) return { msg: 'Field required', type: 'missing' };
        return { msg: `Input should be ${quoteList(tagged.options ?? [])}`, type: 'literal_error' };
      }
      return { msg: issue.message, type: 'value_error' };
    }
    case 'custom': {
      const type = (issue.params as { type?: unknown } | undefined)?.type;
      return { msg: issue.message, type: typeof type === 'string' ? type : 'value_error' };
    }
    default:
      return { msg: issue.message, type: 'value_error' };
  }
}

function typeMismatch(expected: string, input: unknown): { msg: string; type: string } {
  switch (expected) {
    case 'int':
      return typeof input === 'number'
        ? { msg: 'Input should be a valid integer, got a number with a fractional part', type: 'int_type' }
        : { msg: INTEGER_EXPECTED, type: 'int_type' };
    case 'number':
      return { msg: 'Input should be a valid number', type: 'float_type' };
    case 'string':
      return { msg: 'Input should be a valid string', type: 'string_type' };
    case 'boolean':
      return { msg: 'Input should be a valid boolean', type: 'bool_type' };
    case 'object':
      return { msg: 'Input should be an object', type: 'model_type' };
    case 'record':
      return { msg: 'Input should be a valid dictionary', type: 'dict_type' };
    case 'array':
      return { msg: 'Input should be a valid list', type: 'list_type' };
    default:
      return { msg: `Input should be of type ${expected}`, type: `${expected}_type` };
  }
}

/** `'a'`, `'a' or 'b'`, `'a', 'b' or 'c'` (pydantic's wording). */
function quoteList(values: readonly unknown[]): string {
  const quoted = values.map((v) => (typeof v === 'string' ? `'${v}'` : String(v)));
  if (quoted.length <= 1) return quoted[0] ?? 'a valid value';
  return `${quoted.slice(0, -1).join(', ')} or ${quoted[quoted.length - 1]}`;
}

/** `processing.target_fps: Input should be ... ; inference: Field required (and 2 more)`. */
export function summarize(details: readonly ValidationDetail[]): string {
  if (details.length === 0) return 'Request validation failed';
  const parts = details.slice(0, MESSAGE_ISSUES).map((d) => {
    const where = d.loc.length > 1 ? d.loc.slice(1).join('.') : d.loc.join('.');
    return `${where}: ${d.msg}`;
  });
  const more = details.length - MESSAGE_ISSUES;
  return `${parts.join('; ')}${more > 0 ? ` (and ${more} more)` : ''}`;
}

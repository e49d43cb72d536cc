/**
 * The one JSON Schema validator service (the gateway's output schemas, the emulator's response
 * schemas). Tenant schemas are hostile input, so:
 * - size and complexity are capped before anything is compiled (`schemaLimitViolation`);
 * - `pattern`/`patternProperties` run on re2js, a linear-time engine: no pattern can make a
 *   validation backtrack for seconds (`^(x+x+)+y$` is as cheap as `^x+y$`); JS-only syntax
 *   (lookaround, backreferences) does not compile;
 * - compiled validators (and compile errors) are cached by the schema's content hash in a bounded
 *   LRU, so a stream re-sending one schema compiles it once and many schemas cannot grow memory;
 * - ajv's own logging (warnings carrying tenant strings, the generated code of a failed compile)
 *   goes into pino as one escaped field, or nowhere.
 * The draft follows `$schema` (2020-12, 2019-09, else draft-07, with draft-04 exclusive bounds
 * upgraded).
 */
import { createHash } from 'node:crypto';
import Ajv from 'ajv';
import Ajv2019 from 'ajv/dist/2019';
import Ajv2020 from 'ajv/dist/2020';
import type { Options, ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import { RE2JS } from 're2js';
import { isRecord } from './is-record';
import type { Logger } from './logger';
import { LRUCache } from 'lru-cache';

export interface SchemaLimits {
  /** Serialized JSON size of the schema. */
  maxBytes: number;
  /** Nesting depth of objects and arrays. */
  maxDepth: number;
  /** Objects and arrays in the whole schema (ajv's compile time grows with it). */
  maxNodes: number;
  /** Length of one `pattern` / `patternProperties` key. */
  maxPatternLength: number;
}

/**
 * Enough for real output schemas (a few dozen fields), small enough to bound a compile: ajv's
 * compile time grows faster than linearly with the schema (a 3,000-property schema took seconds;
 * `npm run bench hostile` prints the compile time at the cap).
 */
export const DEFAULT_SCHEMA_LIMITS: SchemaLimits = { maxBytes: 16 * 1024, maxDepth: 16, maxNodes: 128, maxPatternLength: 512 };

/** Why `schema` exceeds `limits`, or null. Iterative: a deeply nested body cannot overflow the stack. */
export function schemaLimitViolation(schema: unknown, limits: SchemaLimits = DEFAULT_SCHEMA_LIMITS): string | null {
  const stack: { v: unknown; depth: number; key?: string }[] = [{ v: schema, depth: 1 }];
  let nodes = 0;
  while (stack.length > 0) {
    const { v, depth, key } = stack.pop()!;
    if (key === 'pattern' && typeof v === 'string' && v.length > limits.maxPatternLength) {
      return `a pattern is longer than ${limits.maxPatternLength} characters`;
    }
    if (v === null || typeof v !== 'object') continue;
    if (++nodes > limits.maxNodes) return `more than ${limits.maxNodes} objects and arrays`;
    if (depth > limits.maxDepth) return `nested deeper than ${limits.maxDepth} levels`;
    if (Array.isArray(v)) {
      for (const item of v) stack.push({ v: item, depth: depth + 1 });
      continue;
    }
    for (const [k, child] of Object.entries(v as Record<string, unknown>)) {
      if (key === 'patternProperties' && k.length > limits.maxPatternLength) {
        return `a pattern is longer than ${limits.maxPatternLength} characters`;
      }
      stack.push({ v: child, depth: depth + 1, key: k });
    }
  }
  const bytes = Buffer.byteLength(JSON.stringify(schema) ?? '');
  return bytes > limits.maxBytes ? `larger than ${limits.maxBytes} bytes (${bytes})` : null;
}

/** A JS-syntax regex on re2js (linear time). Throws on syntax RE2 does not have (lookaround, backreferences). */
export function linearRegExp(pattern: string): { test(s: string): boolean } {
  const re = RE2JS.compile(RE2JS.translateRegExp(pattern));
  return { test: (s: string) => re.test(s) };
}

/** ajv's `code.regExp`: ajv calls it with (pattern, flags) and needs `.code` for standalone output (unused). */
const re2Engine = Object.assign((pattern: string) => linearRegExp(pattern), { code: 'linearRegExp' });

export type CompiledSchema = { ok: true; validate: ValidateFunction } | { ok: false; error: string };

export interface JsonSchemaOptions {
  /** Compiled validators kept (LRU). */
  maxEntries?: number;
  limits?: SchemaLimits;
  /** Where ajv's warnings go (debug/warn, one escaped field); omitted → dropped. */
  logger?: Logger;
  /** Retry a schema that fails meta-validation without it (the emulator: loose keywords). */
  lenient?: boolean;
}

type AjvInstance = Ajv | Ajv2019 | Ajv2020;
type Schema = Record<string, unknown>;

const LOG_DETAIL_CHARS = 300;

export class JsonSchemaValidators {
  private readonly instances = new Map<string, AjvInstance>();
  private readonly compiled: LRUCache<string, CompiledSchema>;
  private readonly limits: SchemaLimits;

  constructor(private readonly opts: JsonSchemaOptions = {}) {
    this.compiled = new LRUCache({ max: opts.maxEntries ?? 64 });
    this.limits = opts.limits ?? DEFAULT_SCHEMA_LIMITS;
  }

  /** Number of cached compile results (for tests and the bench). */
  get size(): number {
    return this.compiled.size;
  }

  /** A validator, or why the schema cannot be used (over the caps, invalid, unsupported pattern). */
  compile(schema: unknown): CompiledSchema {
    if (!isRecord(schema) && typeof schema !== 'boolean') return { ok: false, error: 'a JSON Schema must be an object or a boolean' };
    const over = schemaLimitViolation(schema, this.limits);
    if (over) return { ok: false, error: `the schema is too complex: ${over}` };
    const key = createHash('sha256').update(JSON.stringify(schema)).digest('base64url');
    const hit = this.compiled.get(key);
    if (hit) return hit;
    const result = this.compileFresh(schema);
    this.compiled.set(key, result);
    return result;
  }

  /** The validator, or undefined when the schema cannot be used. */
  get(schema: unknown): ValidateFunction | undefined {
    const r = this.compile(schema);
    return r.ok ? r.validate : undefined;
  }

  private compileFresh(schema: Schema | boolean): CompiledSchema {
    const draftUri = isRecord(schema) && typeof schema.$schema === 'string' ? schema.$schema : '';
    const draft = draftUri.includes('2020-12') ? '2020' : draftUri.includes('2019-09') ? '2019' : '07';
    const upgraded = upgradeDraft04(schema) as Schema | boolean;
    let firstError = '';
    for (const validateSchema of this.opts.lenient ? [true, false] : [true]) {
      const name = `${draft}/${validateSchema}`;
      const ajv = this.instances.get(name) ?? this.newAjv(draft, validateSchema);
      this.instances.set(name, ajv);
      try {
        const validate = ajv.compile(upgraded);
        // ajv would keep every compiled schema (and refuse a second one with the same $id): our LRU keeps them.
        if (isRecord(upgraded)) ajv.removeSchema(upgraded);
        return { ok: true, validate };
      } catch (err) {
        firstError ||= (err as Error).message;
        // A failed compile may leave half-registered schemas behind: start that instance afresh.
        this.instances.delete(name);
      }
    }
    return { ok: false, error: firstError.slice(0, LOG_DETAIL_CHARS) };
  }

  private newAjv(draft: string, validateSchema: boolean): AjvInstance {
    const opts: Options = {
      strict: false,
      allErrors: false,
      validateSchema,
      logger: this.ajvLogger(),
      // Skipping ajv's code optimisation passes roughly halves compile time on wide schemas.
      code: { regExp: re2Engine, optimize: false },
    };
    const ajv = draft === '2020' ? new Ajv2020(opts) : draft === '2019' ? new Ajv2019(opts) : new Ajv(opts);
    addFormats(ajv);
    return ajv;
  }

  /** ajv → pino: the first argument only (ajv's error log adds the whole generated function), escaped by pino. */
  private ajvLogger(): Options['logger'] {
    const log = this.opts.logger;
    if (!log) return false;
    const detail = (args: unknown[]) => ({ detail: String(args[0]).slice(0, LOG_DETAIL_CHARS) });
    return {
      log: (...args: unknown[]) => log.debug(detail(args), 'json schema compiler'),
      warn: (...args: unknown[]) => log.warn(detail(args), 'json schema compiler warning'),
      error: (...args: unknown[]) => log.debug(detail(args), 'json schema compile failed'),
    };
  }
}

/** Rewrites draft-04 boolean exclusiveMinimum/Maximum into the numeric form ajv 8 understands. */
function upgradeDraft04(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(upgradeDraft04);
  if (!isRecord(schema)) return schema;
  const out: Schema = {};
  for (const [k, v] of Object.entries(schema)) {
    out[k] = k === 'const' || k === 'enum' || k === 'default' || k === 'examples' ? v : upgradeDraft04(v);
  }
  for (const [ex, bound] of [
    ['exclusiveMinimum', 'minimum'],
    ['exclusiveMaximum', 'maximum'],
  ] as const) {
    if (typeof out[ex] !== 'boolean') continue;
    if (out[ex] === true && typeof out[bound] === 'number') {
      out[ex] = out[bound];
      delete out[bound];
    } else {
      delete out[ex];
    }
  }
  return out;
}

import type { ValidateFunction } from 'ajv';
import { JsonSchemaValidators, linearRegExp } from '../../lib/json-schema';

/**
 * Builds a JSON value that conforms to a JSON Schema, filling it from caller-supplied values
 * where property names match (the analyzer's measurements) and inventing valid values elsewhere:
 * types, const, enum, numeric bounds and multipleOf, string lengths and formats, required,
 * min/max properties and items, nested objects and arrays, $ref, allOf (merged),
 * anyOf/oneOf (first fitting branch). Anything it cannot model (pattern, not, if/then,
 * contains, …) is left to the ajv check in `conformingInstance`, which falls back to the
 * minimal instance when the filled one does not validate.
 */

export type SchemaType = 'string' | 'number' | 'integer' | 'boolean' | 'array' | 'object' | 'null';

/**
 * Supplies a value for a property name, given the JSON type the schema wants there.
 * Returns undefined when it has nothing for that name and type.
 */
export type Filler = (key: string, type: SchemaType | 'any', schema: Readonly<Record<string, unknown>>) => unknown;

type Schema = Record<string, unknown>;

const MAX_DEPTH = 24;

interface Ctx {
  root: unknown;
  filler: Filler | undefined;
  /** How many values came from the filler so far (tells whether an optional property is worth adding). */
  used: number;
}

const isObj = (v: unknown): v is Schema => typeof v === 'object' && v !== null && !Array.isArray(v);
const num = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);

function resolvePointer(root: unknown, ref: string): unknown {
  if (!ref.startsWith('#')) return undefined;
  const parts = ref
    .slice(1)
    .split('/')
    .slice(1)
    .map((p) => decodeURIComponent(p).replace(/~1/g, '/').replace(/~0/g, '~'));
  let cur: unknown = root;
  for (const p of parts) {
    if (!isObj(cur) && !Array.isArray(cur)) return undefined;
    cur = (cur as Record<string, unknown>)[p];
  }
  return cur;
}

/** Follows $ref (local pointers only) and merges allOf, keeping sibling keywords. */
function normalise(schema: unknown, ctx: Ctx, depth: number): unknown {
  if (!isObj(schema) || depth > MAX_DEPTH) return schema;
  let s: Schema = schema;
  if (typeof s.$ref === 'string') {
    const target = resolvePointer(ctx.root, s.$ref);
    const { $ref: _ref, ...rest } = s;
    const resolved = normalise(target, ctx, depth + 1);
    if (resolved === false) return false;
    s = mergeSchemas(isObj(resolved) ? resolved : {}, rest);
  }
  if (Array.isArray(s.allOf)) {
    const { allOf, ...rest } = s;
    let merged: Schema = rest;
    for (const sub of allOf) {
      const n = normalise(sub, ctx, depth + 1);
      if (n === false) return false;
      if (isObj(n)) merged = mergeSchemas(merged, n);
    }
    s = merged;
  }
  return s;
}

/** Merges two schemas as an intersection, well enough for generation. */
function mergeSchemas(a: Schema, b: Schema): Schema {
  const out: Schema = { ...a };
  for (const [k, v] of Object.entries(b)) {
    const prev = out[k];
    if (prev === undefined) {
      out[k] = v;
      continue;
    }
    switch (k) {
      case 'properties':
        out[k] = isObj(prev) && isObj(v) ? { ...prev, ...v } : v;
        break;
      case 'required':
        out[k] = [...new Set([...(Array.isArray(prev) ? prev : []), ...(Array.isArray(v) ? v : [])])];
        break;
      case 'minimum':
      case 'minLength':
      case 'minItems':
      case 'minProperties':
      case 'exclusiveMinimum':
        out[k] = typeof prev === 'number' && typeof v === 'number' ? Math.max(prev, v) : v;
        break;
      case 'maximum':
      case 'maxLength':
      case 'maxItems':
      case 'maxProperties':
      case 'exclusiveMaximum':
        out[k] = typeof prev === 'number' && typeof v === 'number' ? Math.min(prev, v) : v;
        break;
      case 'type': {
        const ta = Array.isArray(prev) ? prev : [prev];
        const tb = Array.isArray(v) ? v : [v];
        const both = ta.filter((t) => tb.includes(t) || (t === 'integer' && tb.includes('number')));
        const extra = tb.filter((t) => t === 'integer' && ta.includes('number'));
        const types = [...new Set([...both, ...extra])];
        out[k] = types.length ? types : v;
        break;
      }
      default:
        out[k] = v;
    }
  }
  return out;
}

function typesOf(s: Schema): SchemaType[] {
  if (typeof s.type === 'string') return [s.type as SchemaType];
  if (Array.isArray(s.type)) return s.type.filter((t): t is SchemaType => typeof t === 'string');
  if ('properties' in s || 'required' in s || 'additionalProperties' in s || 'minProperties' in s) return ['object'];
  if ('items' in s || 'prefixItems' in s || 'minItems' in s || 'maxItems' in s) return ['array'];
  if ('minLength' in s || 'maxLength' in s || 'pattern' in s || 'format' in s) return ['string'];
  if ('minimum' in s || 'maximum' in s || 'exclusiveMinimum' in s || 'exclusiveMaximum' in s || 'multipleOf' in s) {
    return ['number'];
  }
  return [];
}

function fillValue(ctx: Ctx, key: string | undefined, type: SchemaType | 'any', given: unknown, schema: Schema = {}): unknown {
  if (given !== undefined) return given;
  if (key === undefined || !ctx.filler) return undefined;
  return ctx.filler(key, type, schema);
}

function jsonType(v: unknown): SchemaType | undefined {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  switch (typeof v) {
    case 'string':
      return 'string';
    case 'boolean':
      return 'boolean';
    case 'number':
      return Number.isInteger(v) ? 'integer' : 'number';
    case 'object':
      return 'object';
    default:
      return undefined;
  }
}

function sameValue(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

function generate(schemaIn: unknown, ctx: Ctx, key: string | undefined, depth: number, variant: number, given?: unknown): unknown {
  if (schemaIn === true || schemaIn === undefined) {
    const v = fillValue(ctx, key, 'any', given);
    if (v !== undefined && given === undefined) ctx.used++;
    return v === undefined ? null : v;
  }
  const normalised = normalise(schemaIn, ctx, depth);
  if (!isObj(normalised)) return null; // `false` (nothing validates) or garbage
  let s = normalised;
  if (depth > MAX_DEPTH) return null;

  if ('const' in s) return s.const;

  const branches = Array.isArray(s.anyOf) ? s.anyOf : Array.isArray(s.oneOf) ? s.oneOf : undefined;
  if (branches && branches.length > 0) {
    const { anyOf: _a, oneOf: _o, ...rest } = s;
    // First branch, unless it is only `null` and there is something to say for this key.
    const hasFill = fillValue(ctx, key, 'any', given) !== undefined;
    const pick =
      branches.find((b) => {
        const n = normalise(b, ctx, depth + 1);
        return !(hasFill && isObj(n) && (n.type === 'null' || ('const' in n && n.const === null)));
      }) ?? branches[0];
    const n = normalise(pick, ctx, depth + 1);
    if (n === false) return null;
    s = mergeSchemas(rest, isObj(n) ? n : {});
  }

  if (Array.isArray(s.enum) && s.enum.length > 0) {
    const enumVals = s.enum as unknown[];
    const want = fillValue(ctx, key, jsonType(enumVals[0]) ?? 'any', given);
    if (want !== undefined) {
      const hit = enumVals.find(
        (e) => sameValue(e, want) || (typeof e === 'string' && typeof want === 'string' && e.toLowerCase() === want.toLowerCase()),
      );
      if (hit !== undefined) {
        if (given === undefined) ctx.used++;
        return hit;
      }
    }
    return enumVals[variant % enumVals.length];
  }

  let types = typesOf(s);
  if (types.length === 0) {
    const v = fillValue(ctx, key, 'any', given);
    if (v !== undefined && given === undefined) ctx.used++;
    return v === undefined ? null : v;
  }
  // Among the allowed types, prefer one the filler has a value for, then anything but null.
  if (types.length > 1) {
    const withFill = types.find((t) => t !== 'null' && fillValue(ctx, key, t, given) !== undefined);
    const nonNull = types.find((t) => t !== 'null');
    types = [withFill ?? nonNull ?? types[0]!];
  }
  switch (types[0]) {
    case 'object':
      return genObject(s, ctx, key, depth, variant, given);
    case 'array':
      return genArray(s, ctx, key, depth, given);
    case 'string':
      return genString(s, ctx, key, variant, given);
    case 'integer':
    case 'number':
      return genNumber(s, ctx, key, variant, types[0] === 'integer', given);
    case 'boolean': {
      const v = fillValue(ctx, key, 'boolean', given);
      if (typeof v === 'boolean') {
        if (given === undefined) ctx.used++;
        return v;
      }
      return variant % 2 === 1;
    }
    default:
      return null;
  }
}

function genObject(s: Schema, ctx: Ctx, _key: string | undefined, depth: number, _variant: number, given: unknown): unknown {
  const props = isObj(s.properties) ? s.properties : {};
  const required = new Set(Array.isArray(s.required) ? s.required.filter((k): k is string => typeof k === 'string') : []);
  const extraSchema = s.additionalProperties;
  const givenObj = isObj(given) ? given : undefined;
  const out: Record<string, unknown> = {};
  const optionalAdded: string[] = [];

  const schemaFor = (k: string): unknown => (k in props ? props[k] : isObj(extraSchema) ? extraSchema : true);
  const add = (k: string): void => {
    out[k] = generate(schemaFor(k), ctx, k, depth + 1, 0, givenObj?.[k]);
  };

  for (const k of Object.keys(props)) {
    if (required.has(k)) {
      add(k);
      continue;
    }
    // Optional: keep it only if it carries something from the filler.
    const before = ctx.used;
    const v = generate(props[k], ctx, k, depth + 1, 0, givenObj?.[k]);
    if (ctx.used > before || (givenObj && k in givenObj)) {
      out[k] = v;
      optionalAdded.push(k);
    }
  }
  for (const k of required) if (!(k in out)) add(k);

  // dependentRequired (2019+) and the array form of draft-07 `dependencies`.
  for (const depKey of ['dependentRequired', 'dependencies']) {
    const deps = s[depKey];
    if (!isObj(deps)) continue;
    for (const [k, list] of Object.entries(deps)) {
      if (k in out && Array.isArray(list)) for (const d of list) if (typeof d === 'string' && !(d in out)) add(d);
    }
  }

  const minProps = num(s.minProperties) ?? 0;
  for (const k of Object.keys(props)) {
    if (Object.keys(out).length >= minProps) break;
    if (!(k in out)) add(k);
  }
  for (let i = 1; Object.keys(out).length < minProps && extraSchema !== false && i < 1000; i++) {
    if (!(`field_${i}` in out)) add(`field_${i}`);
  }
  const maxProps = num(s.maxProperties);
  if (maxProps !== undefined) {
    while (Object.keys(out).length > maxProps && optionalAdded.length > 0) delete out[optionalAdded.pop()!];
  }
  return out;
}

function genArray(s: Schema, ctx: Ctx, key: string | undefined, depth: number, given: unknown): unknown {
  const prefix: unknown[] = Array.isArray(s.prefixItems) ? s.prefixItems : Array.isArray(s.items) ? s.items : [];
  const rest: unknown = Array.isArray(s.items) ? (s.additionalItems ?? true) : (s.items ?? true);
  const minItems = num(s.minItems) ?? 0;
  const maxItems = num(s.maxItems) ?? Infinity;
  const filled = fillValue(ctx, key, 'array', given);
  const fromFill = Array.isArray(filled) ? filled : undefined;
  if (fromFill && given === undefined) ctx.used++;
  // Without values to copy, one item shows the shape (when the filler is active and room allows).
  let count = fromFill ? fromFill.length : Math.max(prefix.length, ctx.filler && rest !== false ? 1 : 0);
  count = Math.min(Math.max(count, minItems), maxItems);
  if (rest === false) count = Math.min(count, prefix.length);
  const itemKey = key === undefined ? undefined : singular(key);
  const out: unknown[] = [];
  for (let i = 0; i < count; i++) {
    const itemSchema = i < prefix.length ? prefix[i] : rest;
    out.push(generate(itemSchema, ctx, itemKey, depth + 1, i, fromFill?.[i]));
  }
  return out;
}

const singular = (key: string): string => (key.length > 3 && key.endsWith('s') ? key.slice(0, -1) : key);

const FORMAT_SAMPLES: Record<string, () => string> = {
  'date-time': () => new Date().toISOString(),
  date: () => new Date().toISOString().slice(0, 10),
  time: () => new Date().toISOString().slice(11, 19) + 'Z',
  duration: () => 'PT1S',
  email: () => 'user@example.com',
  'idn-email': () => 'user@example.com',
  hostname: () => 'example.com',
  'idn-hostname': () => 'example.com',
  ipv4: () => '127.0.0.1',
  ipv6: () => '::1',
  uri: () => 'https://example.com/',
  'uri-reference': () => 'https://example.com/',
  iri: () => 'https://example.com/',
  'iri-reference': () => 'https://example.com/',
  url: () => 'https://example.com/',
  uuid: () => '00000000-0000-4000-8000-000000000000',
  'json-pointer': () => '',
  'relative-json-pointer': () => '0',
  regex: () => '.*',
};

/** Length in code points, as JSON Schema counts it. */
const cpLength = (s: string): number => [...s].length;

function genString(s: Schema, ctx: Ctx, key: string | undefined, variant: number, given: unknown): string {
  const format = typeof s.format === 'string' ? FORMAT_SAMPLES[s.format] : undefined;
  let v: string;
  if (format) {
    v = format();
  } else {
    const f = fillValue(ctx, key, 'string', given, s);
    if (typeof f === 'string' || typeof f === 'number' || typeof f === 'boolean') {
      if (given === undefined) ctx.used++;
      v = String(f);
    } else {
      v = variant > 0 ? String(variant) : ''; // distinct items for uniqueItems
    }
  }
  const minLength = num(s.minLength) ?? 0;
  const maxLength = num(s.maxLength);
  if (maxLength !== undefined && cpLength(v) > maxLength) v = [...v].slice(0, maxLength).join('');
  if (cpLength(v) < minLength) v = v + 'x'.repeat(minLength - cpLength(v));
  if (typeof s.pattern === 'string') {
    try {
      // Linear-time engine: the pattern and the filled value are both the tenant's.
      const re = linearRegExp(s.pattern);
      if (!re.test(v)) {
        const sample = ['a', 'A', '0', 'x', 'abc', 'ABC', '123', 'a1', ''].find((c) => re.test(c) && cpLength(c) >= minLength);
        if (sample !== undefined) v = sample;
      }
    } catch {
      // A pattern re2js cannot compile fails the schema compile too.
    }
  }
  return v;
}

function genNumber(s: Schema, ctx: Ctx, key: string | undefined, variant: number, integer: boolean, given: unknown): number {
  const f = fillValue(ctx, key, integer ? 'integer' : 'number', given, s);
  let v = 0;
  const parsed =
    typeof f === 'number' ? f : typeof f === 'string' && f.trim() !== '' ? Number(f) : typeof f === 'boolean' ? Number(f) : NaN;
  if (Number.isFinite(parsed)) {
    v = parsed;
    if (given === undefined) ctx.used++;
  } else {
    v = variant; // distinct items for uniqueItems
  }

  // Bounds; draft-04 spelled exclusivity as booleans beside minimum/maximum.
  let lo = num(s.minimum) ?? -Infinity;
  let hi = num(s.maximum) ?? Infinity;
  let loEx = false;
  let hiEx = false;
  if (s.exclusiveMinimum === true) loEx = true;
  if (s.exclusiveMaximum === true) hiEx = true;
  const exMin = num(s.exclusiveMinimum);
  const exMax = num(s.exclusiveMaximum);
  if (exMin !== undefined && exMin >= lo) [lo, loEx] = [exMin, true];
  if (exMax !== undefined && exMax <= hi) [hi, hiEx] = [exMax, true];

  if (integer) v = Math.round(v);
  const step = integer ? 1 : Math.min(1, Number.isFinite(hi - lo) ? (hi - lo) / 2 : 1);
  if (v < lo || (loEx && v <= lo)) v = integer ? (loEx ? Math.floor(lo) + 1 : Math.ceil(lo)) : loEx ? lo + step : lo;
  if (v > hi || (hiEx && v >= hi)) v = integer ? (hiEx ? Math.ceil(hi) - 1 : Math.floor(hi)) : hiEx ? hi - step : hi;

  const m = num(s.multipleOf);
  if (m !== undefined && m > 0) {
    const fits = (x: number) => !(x < lo || x > hi || (loEx && x <= lo) || (hiEx && x >= hi));
    // Validators test `x / m` for an integer in floating point, so 0.3 is not a multiple of 0.1
    // there: walk up from the nearest step to one that is exactly divisible (0.5, 1, …).
    const decimals = (String(m).split('.')[1] ?? '').length;
    const at = (k: number) => (decimals > 0 ? Number((k * m).toFixed(decimals)) : k * m);
    let k = Math.round(v / m);
    if (!fits(at(k))) k = Math.ceil(lo / m);
    for (let tries = 0; tries < 100 && !(fits(at(k)) && Number.isInteger(at(k) / m)); tries++) k++;
    v = at(k);
  }
  return v;
}

/** A value for the schema, filled from `filler` where names match. */
export function instanceFromSchema(schema: unknown, filler?: Filler): unknown {
  const ctx: Ctx = { root: schema, filler, used: 0 };
  return generate(schema, ctx, undefined, 0, 0);
}

/** One-off validator (builds a fresh ajv: slow; prefer a long-lived JsonSchemaValidators). */
export function compileValidator(
  schema: unknown,
  validators = new JsonSchemaValidators({ maxEntries: 1, lenient: true }),
): ValidateFunction | undefined {
  return validators.get(schema);
}

export interface ConformingResult {
  value: unknown;
  /** true: ajv accepted it; false: nothing generated validates; null: the schema does not compile. */
  valid: boolean | null;
  /** Whether the filled instance was rejected and the minimal one used instead. */
  fellBack: boolean;
}

/** The filled instance if it validates, else the minimal instance (no filler). */
export function conformingInstance(schema: unknown, filler?: Filler, validators?: JsonSchemaValidators): ConformingResult {
  const validate = compileValidator(schema, validators);
  const filled = instanceFromSchema(schema, filler);
  if (!validate) return { value: filled, valid: null, fellBack: false };
  if (validate(filled)) return { value: filled, valid: true, fellBack: false };
  const minimal = instanceFromSchema(schema);
  return { value: minimal, valid: validate(minimal) === true, fellBack: true };
}

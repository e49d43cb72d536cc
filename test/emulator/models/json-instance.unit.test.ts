import Ajv from 'ajv';
import Ajv2020 from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import { compileValidator, conformingInstance, instanceFromSchema } from '../../../src/emulator/models/json-instance';
import { JsonSchemaValidators } from '../../../src/lib/json-schema';
import type { Filler } from '../../../src/emulator/models/json-instance';

function expectValid(schema: object | boolean, value: unknown): void {
  const is2020 = typeof schema === 'object' && String((schema as { $schema?: string }).$schema ?? '').includes('2020');
  const ajv = is2020 ? new Ajv2020({ strict: false }) : new Ajv({ strict: false });
  addFormats(ajv);
  const validate = ajv.compile(schema);
  expect({ value, valid: validate(value), errors: validate.errors ?? null }).toEqual({ value, valid: true, errors: null });
}

const SCHEMAS: Record<string, object | boolean> = {
  empty: {},
  true: true,
  string: { type: 'string', minLength: 3, maxLength: 5 },
  patterned: { type: 'string', pattern: '^[A-Z]+$' },
  integerBounds: { type: 'integer', exclusiveMinimum: 3, exclusiveMaximum: 6 },
  numberStep: { type: 'number', minimum: 0.3, maximum: 2, multipleOf: 0.25 },
  enumNumbers: { enum: [3, 5, 8] },
  constObject: { const: { a: [1, 2] } },
  multiType: { type: ['null', 'integer'], minimum: 2 },
  nested: {
    type: 'object',
    properties: {
      a: {
        type: 'object',
        properties: {
          b: { type: 'array', items: { type: 'object', properties: { c: { type: 'boolean' } }, required: ['c'] }, minItems: 2 },
        },
        required: ['b'],
      },
      d: { type: 'string', format: 'date' },
    },
    required: ['a', 'd'],
    additionalProperties: false,
  },
  allOf: {
    allOf: [
      { type: 'object', properties: { x: { type: 'integer' } }, required: ['x'] },
      { properties: { y: { type: 'string', minLength: 2 } }, required: ['y'] },
    ],
  },
  anyOfObjects: { anyOf: [{ type: 'object', required: ['kind'], properties: { kind: { const: 'a' } } }, { type: 'string' }] },
  recursive: {
    $defs: {
      node: {
        type: 'object',
        properties: { value: { type: 'integer' }, children: { type: 'array', items: { $ref: '#/$defs/node' } } },
        required: ['value', 'children'],
      },
    },
    $ref: '#/$defs/node',
  },
  definitions: {
    definitions: { p: { type: 'number', minimum: 10 } },
    type: 'object',
    properties: { q: { $ref: '#/definitions/p' } },
    required: ['q'],
  },
  minProperties: { type: 'object', properties: { a: { type: 'integer' }, b: { type: 'integer' } }, minProperties: 2 },
  minPropertiesExtra: { type: 'object', additionalProperties: { type: 'boolean' }, minProperties: 3 },
  dependentRequired: {
    type: 'object',
    properties: { a: { type: 'integer' }, b: { type: 'string' } },
    required: ['a'],
    dependentRequired: { a: ['b'] },
  },
  uniqueItems: { type: 'array', items: { type: 'integer', minimum: 0 }, minItems: 4, uniqueItems: true },
  uniqueStrings: { type: 'array', items: { type: 'string' }, minItems: 3, uniqueItems: true },
  tuple07: { type: 'array', items: [{ type: 'string' }, { type: 'number' }], additionalItems: false, minItems: 2 },
  prefix2020: {
    $schema: 'https://json-schema.org/draft/2020-12/schema',
    type: 'array',
    prefixItems: [{ type: 'boolean' }],
    items: { type: 'integer' },
    minItems: 3,
  },
  formats: {
    type: 'object',
    properties: {
      a: { type: 'string', format: 'email' },
      b: { type: 'string', format: 'uri' },
      c: { type: 'string', format: 'uuid' },
      d: { type: 'string', format: 'date-time' },
      e: { type: 'string', format: 'ipv4' },
      f: { type: 'string', format: 'time' },
    },
    required: ['a', 'b', 'c', 'd', 'e', 'f'],
  },
  openAiStyle: {
    type: 'object',
    properties: {
      people: { type: 'integer', minimum: 0 },
      activity: { type: 'string', enum: ['walking', 'sitting', 'none'] },
      objects: {
        type: 'array',
        items: {
          type: 'object',
          properties: { label: { type: 'string' }, box: { type: 'array', items: { type: 'number' }, minItems: 4, maxItems: 4 } },
          required: ['label', 'box'],
          additionalProperties: false,
        },
      },
      alert: { type: 'boolean' },
    },
    required: ['people', 'activity', 'objects', 'alert'],
    additionalProperties: false,
  },
};

describe('instanceFromSchema', () => {
  it.each(Object.entries(SCHEMAS))('generates a valid minimal instance: %s', (_name, schema) => {
    expectValid(schema, instanceFromSchema(schema));
  });

  it.each(Object.entries(SCHEMAS))('stays valid with a filler answering every key: %s', (_name, schema) => {
    const filler: Filler = (key, type) =>
      type === 'string' ? `value of ${key}` : type === 'integer' || type === 'number' ? 42 : type === 'boolean' ? true : undefined;
    const { value, valid } = conformingInstance(schema, filler);
    expect(valid).toBe(true);
    expectValid(schema, value);
  });

  it('fills by property name, coerces to the schema type and clamps to bounds', () => {
    const filler: Filler = (key, type) =>
      key === 'frames' ? (type === 'string' ? '12' : 12) : key === 'label' && type === 'string' ? 'hello world' : undefined;
    const schema = {
      type: 'object',
      properties: {
        frames: { type: 'integer', maximum: 10 },
        text_frames: { type: 'string' },
        nested: { type: 'object', properties: { frames: { type: 'string' }, label: { type: 'string', maxLength: 5 } } },
        unrelated: { type: 'string' },
      },
    };
    expect(instanceFromSchema(schema, filler)).toEqual({ frames: 10, nested: { frames: '12', label: 'hello' } });
  });

  it('copies filler arrays item by item and picks a matching enum value case-insensitively', () => {
    const filler: Filler = (key, type) => (key === 'indices' && type === 'array' ? [4, 5, 6] : key === 'colour' ? 'Blue' : undefined);
    const schema = {
      type: 'object',
      properties: { indices: { type: 'array', items: { type: 'integer' }, maxItems: 2 }, colour: { enum: ['red', 'blue'] } },
      required: ['indices', 'colour'],
    };
    expect(instanceFromSchema(schema, filler)).toEqual({ indices: [4, 5], colour: 'blue' });
  });
});

describe('compileValidator / conformingInstance', () => {
  it('compiles draft-07, 2019-09 and 2020-12 schemas, and a draft-04 style one without meta-validation', () => {
    expect(compileValidator({ type: 'integer' })!(3)).toBe(true);
    expect(compileValidator({ $schema: 'https://json-schema.org/draft/2019-09/schema', type: 'integer' })!('x')).toBe(false);
    expect(compileValidator({ $schema: 'https://json-schema.org/draft/2020-12/schema', prefixItems: [{ type: 'string' }] })!([1])).toBe(
      false,
    );
    const draft04 = compileValidator({ type: 'number', minimum: 0, exclusiveMinimum: true })!;
    expect([draft04(0), draft04(0.5)]).toEqual([false, true]);
  });

  it('reports valid=null for a schema that does not compile, and still returns a value', () => {
    const r = conformingInstance({ type: 'object', properties: { a: { $ref: 'https://example.com/remote.json' } }, required: ['a'] });
    expect(r.valid).toBeNull();
    expect(r.value).toEqual({ a: null });
  });

  it('falls back to the minimal instance when the filled one is rejected', () => {
    const schema = { type: 'object', properties: { n: { type: 'integer', not: { const: 7 } } } };
    const r = conformingInstance(schema, (key) => (key === 'n' ? 7 : undefined));
    expect(r).toEqual({ value: {}, valid: true, fellBack: true });
  });
});

describe('JsonSchemaValidators (emulator use)', () => {
  it('compiles a schema once, reuses it, and evicts the least recently used', () => {
    const v = new JsonSchemaValidators({ maxEntries: 2, lenient: true });
    const a = { type: 'integer' };
    const first = v.get(a)!;
    expect(v.get({ type: 'integer' })).toBe(first); // same JSON, new object: cached
    v.get({ type: 'string' });
    v.get(a); // refresh a
    v.get({ type: 'boolean' }); // evicts string
    expect(v.get(a)).toBe(first);
    expect(v.get({ type: 'boolean' })!(true)).toBe(true);
  });

  it('accepts two schemas with the same $id one after another, and survives a failed compile', () => {
    const v = new JsonSchemaValidators({ lenient: true });
    const one = v.get({ $id: 'https://example.com/s', type: 'integer' })!;
    const two = v.get({ $id: 'https://example.com/s', type: 'string' })!;
    expect([one(1), two('x'), two(1)]).toEqual([true, true, false]);
    expect(v.get({ type: 'object', properties: { a: { $ref: 'https://example.com/missing.json' } } })).toBeUndefined();
    expect(v.get({ type: 'number' })!(1.5)).toBe(true);
  });
});

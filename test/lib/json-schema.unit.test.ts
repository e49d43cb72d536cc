/**
 * The JSON Schema service: caps before compiling, linear-time patterns, content-hash cache, and
 * the compiler's logging kept inside pino (no schema text reaches the console).
 */
import { logLines } from '../helpers/log-lines';
import { createLogger } from '../../src/lib/logger';
import { DEFAULT_SCHEMA_LIMITS, JsonSchemaValidators, schemaLimitViolation } from '../../src/lib/json-schema';
import { conformingInstance } from '../../src/emulator/models/json-instance';

function wideSchema(n: number) {
  const properties: Record<string, unknown> = {};
  for (let i = 0; i < n; i++) properties[`field_${i}`] = { type: 'string', description: `property number ${i} of a wide schema` };
  return { type: 'object', properties };
}

describe('caps', () => {
  test('the 193 KB / 3,000-property schema is refused before any compile', () => {
    const v = new JsonSchemaValidators();
    const r = v.compile(wideSchema(3000));
    expect(r).toEqual({ ok: false, error: expect.stringMatching(/too complex: more than 128 objects/) });
    expect(v.size).toBe(0);
  });

  test('bytes, depth and pattern length are each capped; a deeply nested value cannot overflow the stack', () => {
    expect(schemaLimitViolation({ description: 'x'.repeat(DEFAULT_SCHEMA_LIMITS.maxBytes) })).toMatch(/larger than/);
    let deep: unknown = {};
    for (let i = 0; i < 100_000; i++) deep = { not: deep };
    expect(schemaLimitViolation(deep)).toMatch(/more than 128 objects|nested deeper/);
    let nested: unknown = {};
    for (let i = 0; i < 40; i++) nested = { items: nested };
    expect(schemaLimitViolation(nested)).toMatch(/nested deeper than 16/);
    expect(schemaLimitViolation({ type: 'string', pattern: 'a'.repeat(600) })).toMatch(/pattern is longer/);
    expect(schemaLimitViolation({ patternProperties: { ['b'.repeat(600)]: {} } })).toMatch(/pattern is longer/);
    expect(schemaLimitViolation(wideSchema(100))).toBeNull();
  });
});

describe('linear-time patterns (ReDoS)', () => {
  const schema = { type: 'object', properties: { answer: { type: 'string', pattern: '^(x+x+)+y$' } }, required: ['answer'] };

  test('^(x+x+)+y$ against 40 x answers correctly (backtracking would take hours)', () => {
    const validate = new JsonSchemaValidators().get(schema)!;
    expect(validate({ answer: 'x'.repeat(40) })).toBe(false);
    expect(validate({ answer: `${'x'.repeat(40)}y` })).toBe(true);
  });

  test('patternProperties use the same engine; JS-only syntax (backreference) is refused, not run', () => {
    const v = new JsonSchemaValidators();
    const pp = v.get({ type: 'object', patternProperties: { '^(a|aa)+$': { type: 'integer' } } })!;
    expect(pp({ [`${'a'.repeat(50)}`]: 'no' })).toBe(false);
    expect(pp({ b: 'anything' })).toBe(true);
    expect(v.compile({ type: 'string', pattern: '(a)\\1' })).toMatchObject({ ok: false });
  });

  test('the emulator fills a pattern-constrained string with the same engine', () => {
    const r = conformingInstance(schema, () => 'x'.repeat(40), new JsonSchemaValidators({ lenient: true }));
    expect(r.valid).not.toBeNull(); // compiled; the 40-x fill was tested in linear time
  });
});

describe('drafts and cache', () => {
  test('2020-12 $schema compiles (prefixItems is a 2020-12 keyword)', () => {
    const validate = new JsonSchemaValidators().get({
      $schema: 'https://json-schema.org/draft/2020-12/schema',
      type: 'array',
      prefixItems: [{ type: 'integer' }],
      items: false,
    })!;
    expect([validate([1]), validate([1, 2]), validate(['a'])]).toEqual([true, false, false]);
  });

  test('one compile per content, failures cached too, LRU bounded', () => {
    const v = new JsonSchemaValidators({ maxEntries: 3 });
    const a = v.compile({ type: 'integer' });
    expect(v.compile({ type: 'integer' })).toBe(a);
    const bad = v.compile({ type: 'no-such-type' });
    expect(bad.ok).toBe(false);
    expect(v.compile({ type: 'no-such-type' })).toBe(bad);
    for (let i = 0; i < 10; i++) v.compile({ type: 'string', maxLength: i });
    expect(v.size).toBe(3);
  });
});

describe('compiler logging', () => {
  test('a format value with a newline and a JSON line stays one escaped field of one pino line; nothing on the console', () => {
    const { sink, lines } = logLines();
    const logger = createLogger('debug', 'test', sink);
    const consoleSpies = (['log', 'warn', 'error'] as const).map((m) => jest.spyOn(console, m).mockImplementation(() => undefined));
    try {
      const evil = 'nope"}\n{"level":60,"msg":"INJECTED","service":"gateway"}\n';
      const v = new JsonSchemaValidators({ logger });
      expect(v.compile({ type: 'object', properties: { a: { type: 'string', format: evil } } }).ok).toBe(true);
      // A failed compile (ajv logs its generated code on some failures) stays off the console too.
      v.compile({ type: 'object', properties: { a: { $ref: '#/nowhere' } } });
      for (const spy of consoleSpies) expect(spy).not.toHaveBeenCalled();
    } finally {
      consoleSpies.forEach((s) => s.mockRestore());
    }
    const parsed = lines.map((l) => JSON.parse(l) as { msg: string; detail?: string });
    expect(parsed.some((p) => p.msg === 'INJECTED')).toBe(false);
    const warning = parsed.find((p) => p.msg === 'json schema compiler warning');
    expect(warning?.detail).toContain('INJECTED'); // the tenant's text is there, as data
    expect(parsed.every((p) => (p.detail ?? '').length <= 300)).toBe(true);
  });
});

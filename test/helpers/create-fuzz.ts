/**
 * Hostile /v0.2 create bodies (fast-check, a devDependency: bench and tests only), shared by the
 * create-body fuzz test and the `hostile` bench. Bodies are near-valid on purpose: each key is
 * either a sane value or a hostile one (huge or fractional numbers, long or control-character
 * strings, wrong types, nested junk, huge or regex-heavy output schemas), so most requests reach
 * deep into validation instead of failing at the first key.
 */
import fc from 'fast-check';

/** The fixed seed: a failure reproduces with the same runs. */
export const FUZZ_SEED = 0x8a11;

/** Marks a deep-nesting placeholder (a string no other generator produces with this prefix). */
const DEEP = '\u0000deep:';

const hostileNumber = fc.oneof(
  fc.constantFrom(0, -1, 1e308, -1e308, 2147484, 2 ** 31, 2 ** 53 + 1, Number.MAX_SAFE_INTEGER, 5e-324, 0.1, 60, 60.0001, 3600, 3601),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.integer(),
);

const hostileString = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.constantFrom('', '\n{"level":60,"msg":"injected"}\n', '../../etc/passwd', '%0d%0a', '\u0000', 'clip', 'frame', 'native', 'webrtc'),
  fc.integer({ min: 1000, max: 70_000 }).map((n) => 'x'.repeat(n)),
);

const junk: fc.Arbitrary<unknown> = fc.oneof(
  { depthSize: 'small' },
  hostileNumber,
  hostileString,
  fc.boolean(),
  fc.constant(null),
  fc.jsonValue({ maxDepth: 3 }),
  // Deep nesting: the body parser accepts it, nothing after it may recurse on it. A placeholder
  // that `bodyText` expands, so neither fast-check nor the client recurses on it either.
  fc.integer({ min: 100, max: 20_000 }).map((depth) => `${DEEP}${depth}`),
);

/** The request text of a generated body (deep-nesting placeholders expanded). */
export function bodyText(body: unknown): string {
  return JSON.stringify(body).replace(/"\\u0000deep:(\d+)"/g, (_m, n: string) => `${'{"a":'.repeat(Number(n))}{}${'}'.repeat(Number(n))}`);
}

const maybe = <T>(sane: fc.Arbitrary<T>) => fc.oneof({ weight: 12, arbitrary: sane }, { weight: 1, arbitrary: junk });

const outputSchema = fc.oneof(
  fc.constant({ type: 'object', properties: { answer: { type: 'string' } } }),
  fc.constant({ type: 'object', properties: { answer: { type: 'string', pattern: '^(x+x+)+y$' } } }),
  fc.constant({ type: 'string', format: 'nope"}\n{"level":60,"msg":"injected"}' }),
  fc.constant({ type: 'no-such-type' }),
  fc.constant({ $schema: 'https://json-schema.org/draft/2020-12/schema', type: 'array', prefixItems: [{ type: 'integer' }] }),
  fc.integer({ min: 1, max: 4000 }).map((n) => ({
    type: 'object',
    properties: Object.fromEntries(Array.from({ length: n }, (_, i) => [`p${i}`, { type: 'string' }])),
  })),
  fc.constant({ type: 'string', pattern: '(a)\\1' }),
  junk,
);

const clip = fc.record(
  {
    target_fps: maybe(fc.integer({ min: 1, max: 30 })),
    fps: maybe(fc.integer({ min: 1, max: 60 })),
    sampling_ratio: maybe(fc.double({ min: 0.1, max: 1, noNaN: true })),
    clip_length_seconds: maybe(fc.double({ min: 0.1, max: 60, noNaN: true })),
    delay_seconds: maybe(fc.double({ min: 0.5, max: 10, noNaN: true })),
  },
  { requiredKeys: ['clip_length_seconds', 'delay_seconds'] },
);
const frame = fc.record({ interval_seconds: maybe(fc.double({ min: 0.5, max: 60, noNaN: true })) });

const inference = fc.record(
  {
    prompt: maybe(fc.string({ minLength: 1, maxLength: 60 })),
    model: maybe(fc.constantFrom('local/analyzer', 'local/analyzer-mini', 'no/such-model')),
    backend: maybe(fc.constantFrom('svc', 'thirdparty')),
    output_schema_json: fc.oneof({ weight: 3, arbitrary: fc.constant(null) }, { weight: 2, arbitrary: outputSchema }),
    max_output_tokens: maybe(fc.integer({ min: 1, max: 64 })),
  },
  { requiredKeys: ['prompt', 'model'] },
);

const source = fc.oneof(
  { weight: 4, arbitrary: fc.constant({ type: 'native' }) },
  fc.record({ type: fc.constant('webrtc'), sdp: maybe(hostileString) }),
  fc.record({ type: fc.constant('room'), url: maybe(hostileString), token: maybe(hostileString) }),
  junk,
);

/** A create body: usually an object shaped like the contract's, sometimes any JSON value. */
export const createBodies: fc.Arbitrary<unknown> = fc.oneof(
  {
    weight: 8,
    arbitrary: fc.record(
      {
        mode: maybe(fc.constantFrom('clip', 'frame')),
        processing: fc.oneof({ weight: 3, arbitrary: clip }, { weight: 3, arbitrary: frame }, { weight: 1, arbitrary: junk }),
        inference: fc.oneof({ weight: 4, arbitrary: inference }, { weight: 1, arbitrary: junk }),
        source,
        client: fc.oneof(fc.record({ request_id: maybe(fc.string({ maxLength: 20 })) }), junk),
        extra: fc.oneof({ weight: 1, arbitrary: junk }, { weight: 3, arbitrary: fc.constant(undefined) }),
      },
      { requiredKeys: ['processing', 'inference'] },
    ),
  },
  { weight: 1, arbitrary: junk },
);

/** Raw request bodies that are not JSON (or barely): the body parser's side. */
export const rawBodies: fc.Arbitrary<string> = fc.oneof(
  fc.string({ maxLength: 200 }),
  fc.constantFrom('{', '[', '{"a":', 'null', '"str"', '1e309', '{"inference":{"prompt":"x"}', '\u0000'),
);

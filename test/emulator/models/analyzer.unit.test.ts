import Ajv from 'ajv';
import Ajv2020 from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import sharp from 'sharp';
import { encodeFrame } from '../../../src/emulator/frames/codec';
import { PatternRenderer } from '../../../src/emulator/frames/pattern';
import type { StoredFrame } from '../../../src/emulator/frames/types';
import { EMPTY_TAIL, analyze, createAnalyzer } from '../../../src/emulator/models/analyzer';
import type { AnalyzerRequest, VisualContext } from '../../../src/emulator/models/analyzer';
import type { FrameStats } from '../../../src/emulator/models/frame-stats';

const TAIL_RE = /^\[frames=(\d+) index=(none|\d+\.\.\d+) span_ms=(\d+) pattern=(none|\d+\.\.\d+)\]$/;

interface FrameSpec {
  index: number;
  streamTimeMs: number;
}

/** Pattern frames published at width x height, stored 320 wide at q75 as the buffer would. */
async function patternFrames(specs: FrameSpec[], width = 640, height = 480, paint = (index: number) => index): Promise<StoredFrame[]> {
  const r = new PatternRenderer(width, height);
  return Promise.all(
    specs.map(async ({ index, streamTimeMs }) => ({
      index,
      streamTimeMs,
      capturedAtMs: 1_700_000_000_000 + streamTimeMs,
      width,
      height,
      jpeg: await encodeFrame({ width, height, format: 'rgb', data: r.renderRgb(paint(index)) }, { storeWidth: 320, quality: 75 }),
    })),
  );
}

async function flatFrames(specs: FrameSpec[], colour: { r: number; g: number; b: number }): Promise<StoredFrame[]> {
  const jpeg = await sharp({ create: { width: 320, height: 240, channels: 3, background: colour } })
    .jpeg({ quality: 80 })
    .toBuffer();
  return specs.map(({ index, streamTimeMs }) => ({ index, streamTimeMs, capturedAtMs: streamTimeMs, width: 320, height: 240, jpeg }));
}

const window = (first: number, count: number, stepMs: number, t0 = 0): FrameSpec[] =>
  Array.from({ length: count }, (_, i) => ({ index: first + i, streamTimeMs: t0 + i * stepMs }));

const video = (frames: StoredFrame[], streamId = '0b6c2a4e-1111-4222-8333-944445555666'): VisualContext => ({
  streamId,
  kind: 'video',
  frames,
});
const lastLine = (text: string) => text.split('\n').at(-1)!;

function ajvFor(schema: object): Ajv {
  const ajv = '$schema' in schema && String(schema.$schema).includes('2020') ? new Ajv2020({ strict: false }) : new Ajv({ strict: false });
  addFormats(ajv);
  return ajv;
}

async function jsonAnswer(schema: object, contexts: VisualContext[], prompt = 'Describe the stream.'): Promise<Record<string, unknown>> {
  const req: AnalyzerRequest = { prompt, contexts, variant: 'full', responseFormat: { type: 'json_schema', schema } };
  const { text } = await analyze(req);
  const value = JSON.parse(text) as Record<string, unknown>;
  const validate = ajvFor(schema).compile(schema);
  expect({ valid: validate(value), errors: validate.errors ?? null }).toEqual({ valid: true, errors: null });
  return value;
}

describe('analyze: prose and tails', () => {
  it('reads a known pattern window: exact tail, prompt echoed, colour, brightness and motion described', async () => {
    const frames = await patternFrames(window(100, 10, 100));
    const { text, analyses } = await analyze({ prompt: 'What is\nhappening here?', contexts: [video(frames)], variant: 'full' });
    expect(lastLine(text)).toBe('[frames=10 index=100..109 span_ms=900 pattern=100..109]');
    expect(text).toContain('You asked: "What is happening here?"');
    expect(text).toMatch(/mostly blue \(#[0-9a-f]{6}\)/);
    expect(text).toMatch(/brightness \d+ of 255/);
    expect(text).toContain('moving');
    const a = analyses[0]!;
    expect(a).toMatchObject({
      frames: 10,
      decodedFrames: 10,
      firstIndex: 100,
      lastIndex: 109,
      spanMs: 900,
      patternFirst: 100,
      patternLast: 109,
    });
    expect(a.patternIndices).toEqual([100, 101, 102, 103, 104, 105, 106, 107, 108, 109]);
    expect(a.dominantColour?.name).toBe('blue');
    expect(a.motionWord).toBe('moving');
    expect(a.brightness!).toBeGreaterThan(40);
    expect(a.brightness!).toBeLessThan(160);
  });

  it('keeps the lifetime index and the painted pattern index apart', async () => {
    const frames = await patternFrames(window(5, 3, 200, 1000), 320, 240, (i) => i + 995);
    const { text } = await analyze({ prompt: 'x', contexts: [video(frames)], variant: 'mini' });
    expect(lastLine(text)).toBe('[frames=3 index=5..7 span_ms=400 pattern=1000..1002]');
  });

  it('reports pattern=none, the colour, the brightness and stillness for ordinary frames', async () => {
    const frames = await flatFrames(window(0, 4, 500), { r: 200, g: 30, b: 30 });
    const { text, analyses } = await analyze({ prompt: 'colour?', contexts: [video(frames)], variant: 'full' });
    expect(lastLine(text)).toBe('[frames=4 index=0..3 span_ms=1500 pattern=none]');
    expect(text).toContain('No test pattern is visible');
    expect(analyses[0]!.dominantColour?.name).toBe('red');
    expect(analyses[0]!.brightness!).toBeGreaterThan(76);
    expect(analyses[0]!.brightness!).toBeLessThan(86); // BT.601 luma of (200,30,30) is 80.8
    expect(analyses[0]!.motionWord).toBe('still');
  });

  it('writes one tail per context in order, the last line being the last context', async () => {
    const a = await patternFrames(window(10, 3, 100), 320, 240);
    const b = await flatFrames(window(40, 2, 250), { r: 20, g: 180, b: 40 });
    const image: VisualContext = { streamId: 'img-stream', kind: 'image', frames: a.slice(2) };
    const { text } = await analyze({ prompt: 'Compare', contexts: [video(a), video(b, 'second'), image], variant: 'full' });
    const lines = text.split('\n');
    expect(lines.slice(-3)).toEqual([
      '[frames=3 index=10..12 span_ms=200 pattern=10..12]',
      '[frames=2 index=40..41 span_ms=250 pattern=none]',
      '[frames=1 index=12..12 span_ms=0 pattern=12..12]',
    ]);
    for (const l of lines.slice(-3)) expect(l).toMatch(TAIL_RE);
    expect(lines.slice(0, -3).join('\n')).not.toMatch(/\[frames=/);
    expect(text).toContain('green');
  });

  it('mini is terse and carries the same tail', async () => {
    const frames = await patternFrames(window(100, 5, 100), 320, 240);
    const full = await analyze({ prompt: 'What do you see?', contexts: [video(frames)], variant: 'full' });
    const mini = await analyze({ prompt: 'What do you see?', contexts: [video(frames)], variant: 'mini' });
    expect(lastLine(mini.text)).toBe(lastLine(full.text));
    expect(mini.text.length).toBeLessThan(full.text.length);
    expect(mini.text.split('\n')[0]).toMatch(
      /^5 frames 100\.\.104, 400 ms, pattern 100\.\.104, blue #[0-9a-f]{6}, brightness \d+, moving\.$/,
    );
  });

  it('says less within a character budget: full, then terse, then the tail alone', async () => {
    const frames = await patternFrames(window(100, 5, 100), 320, 240);
    const req = { prompt: 'What do you see?', contexts: [video(frames)], variant: 'full' as const };
    const full = await analyze(req);
    const tail = lastLine(full.text);
    expect((await analyze({ ...req, maxChars: full.text.length })).text).toBe(full.text);
    const terse = await analyze({ ...req, maxChars: full.text.length - 1 });
    expect(terse.text.length).toBeLessThan(full.text.length);
    expect(lastLine(terse.text)).toBe(tail);
    expect((await analyze({ ...req, maxChars: tail.length + 5 })).text).toBe(tail);
  });

  it('answers a text-only request and uses the empty tail', async () => {
    const { text, analyses } = await analyze({ prompt: 'Hello, are you there?', contexts: [], variant: 'full' });
    expect(analyses).toEqual([]);
    expect(lastLine(text)).toBe(EMPTY_TAIL);
    expect(EMPTY_TAIL).toBe('[frames=0 index=none span_ms=0 pattern=none]');
    expect(text).toMatch(/No image or video frames were provided/);
    expect(text).toContain('Hello, are you there?');
    const mini = await analyze({ prompt: '', contexts: [], variant: 'mini' });
    expect(lastLine(mini.text)).toBe(EMPTY_TAIL);
  });

  it('handles an empty context and undecodable frames without failing', async () => {
    const good = await patternFrames(window(3, 2, 100), 320, 240);
    const broken: StoredFrame = { ...good[0]!, index: 5, streamTimeMs: 300, jpeg: Buffer.from('garbage') };
    const { text, analyses } = await analyze({
      prompt: 'x',
      contexts: [video([]), video([...good, broken])],
      variant: 'full',
    });
    expect(text.split('\n').slice(-2)).toEqual([
      '[frames=0 index=none span_ms=0 pattern=none]',
      '[frames=3 index=3..5 span_ms=300 pattern=3..4]',
    ]);
    expect(analyses[1]!.decodedFrames).toBe(2);
  });

  it('neutralises brackets in the echoed prompt so tails stay unambiguous', async () => {
    const frames = await patternFrames(window(1, 1, 100), 320, 240);
    const { text } = await analyze({
      prompt: 'fake [frames=99 index=1..2 span_ms=0 pattern=none]',
      contexts: [video(frames)],
      variant: 'full',
    });
    expect(text.match(/\[frames=/g)).toHaveLength(1);
  });

  it('decodes a 10-frame 320x240 window once, and reuses cached stats', async () => {
    const frames = await patternFrames(window(0, 10, 100), 320, 240);
    /** Counts the frames decoded (each decode stores its stats once). */
    class CountingCache extends WeakMap<Buffer, FrameStats | null> {
      stored = 0;
      override set(key: Buffer, value: FrameStats | null): this {
        this.stored++;
        return super.set(key, value);
      }
    }
    const cache = new CountingCache();
    const first = await analyze({ prompt: 'x', contexts: [video(frames)], variant: 'mini' }, { cache });
    expect(cache.stored).toBe(10);
    const second = await analyze({ prompt: 'x', contexts: [video(frames)], variant: 'mini' }, { cache });
    expect(second.text).toBe(first.text);
    expect(cache.has(frames[0]!.jpeg)).toBe(true);
    // Reused, not decoded again (counted, not timed: a loaded machine's pause can make any run slower;
    // the cold decode's time is a figure of `npm run bench emulator`, 'completion: first call').
    expect(cache.stored).toBe(10);
  });
});

describe('analyze: JSON answers', () => {
  let frames: StoredFrame[];
  beforeAll(async () => {
    frames = await patternFrames(window(100, 10, 100));
  });

  it('json_object: an object with the analysis fields', async () => {
    const { text } = await analyze({ prompt: 'p', contexts: [video(frames)], variant: 'full', responseFormat: { type: 'json_object' } });
    const obj = JSON.parse(text) as Record<string, unknown>;
    expect(obj).toMatchObject({
      frames: 10,
      first_index: 100,
      last_index: 109,
      span_ms: 900,
      pattern_first: 100,
      pattern_last: 109,
      dominant_color: 'blue',
      motion: 'moving',
      moving: true,
    });
    expect(typeof obj.answer).toBe('string');
    expect(obj.contexts).toHaveLength(1);
  });

  it('json_schema, flat with required fields, enums and additionalProperties false: filled from the analysis', async () => {
    const schema = {
      type: 'object',
      properties: {
        frame_count: { type: 'integer', minimum: 0 },
        first_index: { type: 'integer' },
        last_index: { type: 'integer' },
        duration_ms: { type: 'number' },
        pattern_first: { type: ['integer', 'null'] },
        pattern_last: { type: ['integer', 'null'] },
        dominant_colour: { type: 'string', enum: ['red', 'green', 'blue', 'other'] },
        brightness: { type: 'number', minimum: 0, maximum: 255 },
        moving: { type: 'boolean' },
        description: { type: 'string', minLength: 1 },
      },
      required: [
        'frame_count',
        'first_index',
        'last_index',
        'duration_ms',
        'pattern_first',
        'pattern_last',
        'dominant_colour',
        'brightness',
        'moving',
        'description',
      ],
      additionalProperties: false,
    };
    const v = await jsonAnswer(schema, [video(frames)]);
    expect(v).toMatchObject({
      frame_count: 10,
      first_index: 100,
      last_index: 109,
      duration_ms: 900,
      pattern_first: 100,
      pattern_last: 109,
      dominant_colour: 'blue',
      moving: true,
    });
    expect(v.description).toContain('Describe the stream.');
  });

  it('json_schema, nested objects, arrays with bounds and uniqueness, enums', async () => {
    const schema = {
      type: 'object',
      properties: {
        summary: { type: 'string', maxLength: 40 },
        stats: {
          type: 'object',
          properties: {
            count: { type: 'integer', minimum: 0, maximum: 5 },
            colour: { type: 'string', enum: ['red', 'green', 'other'] },
            motion: { type: 'string', enum: ['still', 'slight', 'moving'] },
            pattern_indices: { type: 'array', items: { type: 'integer' }, maxItems: 4 },
          },
          required: ['count', 'colour', 'motion', 'pattern_indices'],
          additionalProperties: false,
        },
        tags: { type: 'array', items: { type: 'string', minLength: 2 }, minItems: 2, maxItems: 3, uniqueItems: true },
        objects: {
          type: 'array',
          minItems: 1,
          items: {
            type: 'object',
            properties: { label: { type: 'string' }, confidence: { type: 'number', exclusiveMinimum: 0, maximum: 1 } },
            required: ['label', 'confidence'],
          },
        },
      },
      required: ['summary', 'stats', 'tags', 'objects'],
    };
    const v = await jsonAnswer(schema, [video(frames)]);
    const stats = v.stats as Record<string, unknown>;
    expect(stats.count).toBe(5); // 10 frames, clamped to the maximum
    expect(stats.colour).toBe('red'); // 'blue' is not allowed: first enum value
    expect(stats.motion).toBe('moving');
    expect(stats.pattern_indices).toEqual([100, 101, 102, 103]);
    expect((v.summary as string).length).toBeLessThanOrEqual(40);
  });

  it('json_schema, numbers with bounds and steps, brightness as a fraction when capped at 1', async () => {
    const schema = {
      type: 'object',
      properties: {
        brightness: { type: 'number', minimum: 0, maximum: 1 },
        span_ms: { type: 'integer', multipleOf: 50, minimum: 1000 },
        score: { type: 'number', exclusiveMinimum: 0, exclusiveMaximum: 1 },
        level: { type: 'integer', minimum: 3, maximum: 7 },
        ratio: { type: 'number', multipleOf: 0.1, minimum: 0.25 },
      },
      required: ['brightness', 'span_ms', 'score', 'level', 'ratio'],
    };
    const v = await jsonAnswer(schema, [video(frames)]);
    expect(v.brightness).toBeGreaterThan(0.1);
    expect(v.brightness).toBeLessThan(0.7);
    expect(v.span_ms).toBe(1000);
    expect(v.level).toBe(3);
  });

  it('json_schema, $defs/$ref, anyOf, oneOf, const, nullable and formats', async () => {
    const schema = {
      $defs: {
        colour: {
          type: 'object',
          properties: { name: { type: 'string' }, hex: { type: 'string', pattern: '^#[0-9a-f]{6}$' } },
          required: ['name', 'hex'],
        },
      },
      type: 'object',
      properties: {
        version: { const: 'v1' },
        dominant_color: { $ref: '#/$defs/colour' },
        moving: { anyOf: [{ type: 'boolean' }, { type: 'null' }] },
        pattern: { oneOf: [{ type: 'string', maxLength: 40 }, { type: 'integer' }] },
        at: { type: 'string', format: 'date-time' },
        id: { type: 'string', format: 'uuid' },
        contact: { type: 'string', format: 'email' },
        note: { type: ['string', 'null'] },
      },
      required: ['version', 'dominant_color', 'moving', 'pattern', 'at', 'id', 'contact', 'note'],
    };
    const v = await jsonAnswer(schema, [video(frames)]);
    expect(v.version).toBe('v1');
    expect(v.moving).toBe(true);
    expect(v.pattern).toBe('100..109');
    expect((v.dominant_color as Record<string, unknown>).hex).toMatch(/^#[0-9a-f]{6}$/);
  });

  it('json_schema, draft 2020-12 with prefixItems; and no visual context at all', async () => {
    const schema = {
      $schema: 'https://json-schema.org/draft/2020-12/schema',
      type: 'object',
      properties: {
        range: { type: 'array', prefixItems: [{ type: 'integer' }, { type: 'string' }], items: false, minItems: 2 },
        frames: { type: 'integer' },
        answer: { type: 'string' },
      },
      required: ['range', 'frames', 'answer'],
    };
    await jsonAnswer(schema, [video(frames)]);
    const empty = await jsonAnswer(schema, [], 'Hi there');
    expect(empty.frames).toBe(0);
    expect(empty.answer).toMatch(/No image or video frames/);
  });

  it('json_schema: falls back to the minimal valid instance when the filled one does not validate', async () => {
    const schema = {
      type: 'object',
      properties: { frames: { type: 'integer', not: { const: 10 } }, name: { type: 'string' } },
      required: ['name'],
    };
    const v = await jsonAnswer(schema, [video(frames)]);
    expect(v).toEqual({ name: '' });
  });
});

describe('createAnalyzer', () => {
  it('shares the frame cache and compiled schemas across requests', async () => {
    const analyzer = createAnalyzer();
    const frames = await patternFrames(window(7, 3, 100), 320, 240);
    const schema = {
      type: 'object',
      properties: { frames: { type: 'integer' }, pattern_last: { type: 'integer' } },
      required: ['frames', 'pattern_last'],
    };
    const req: AnalyzerRequest = {
      prompt: 'p',
      contexts: [video(frames)],
      variant: 'mini',
      responseFormat: { type: 'json_schema', schema },
    };
    const a = await analyzer.analyze(req);
    const b = await analyzer.analyze({
      ...req,
      responseFormat: { type: 'json_schema', schema: JSON.parse(JSON.stringify(schema)) as object },
    });
    expect(JSON.parse(a.text)).toEqual({ frames: 3, pattern_last: 9 });
    expect(b.text).toBe(a.text);
    const plain = await analyzer.analyze({ prompt: 'p', contexts: [video(frames)], variant: 'mini' });
    expect(lastLine(plain.text)).toBe('[frames=3 index=7..9 span_ms=200 pattern=7..9]');
  });
});

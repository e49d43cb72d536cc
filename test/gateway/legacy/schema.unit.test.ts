import { brandOf } from '../../../src/brand';
import { ServiceError, type ValidationDetail } from '../../../src/lib/errors';
import { createLegacySchemas, detectProcessingKind, type LegacyCreateRequest } from '../../../src/gateway/legacy/contract/schema';
import {
  legacyError,
  legacyErrorRequestId,
  legacyJsonInvalid,
  legacyRequestId,
  parseLegacy,
  summarize,
} from '../../../src/gateway/legacy/contract/validate';

const brand = brandOf({ brand: 'svc', roomVendor: 'room' });
const schemas = createLegacySchemas(brand);

type Body = Record<string, unknown>;
const clone = <T>(v: T): T => structuredClone(v);

const inference = { prompt: 'What is happening?', model: 'acme/vision-1' };
const clipBody: Body = {
  mode: 'clip',
  processing: { target_fps: 2, clip_length_seconds: 3, delay_seconds: 2 },
  inference,
};
const frameBody: Body = { mode: 'frame', processing: { interval_seconds: 1 }, inference };

/** Sets (or, with `undefined`, deletes) a dotted path in a copy of `body`. */
function withPath(body: unknown, path: string, value: unknown): unknown {
  const out = clone(body) as Body;
  const keys = path.split('.');
  let node = out;
  for (const k of keys.slice(0, -1)) node = node[k] as Body;
  const last = keys[keys.length - 1]!;
  if (value === undefined) delete node[last];
  else node[last] = value;
  return out;
}

function parseCreate(body: unknown): LegacyCreateRequest {
  return parseLegacy(schemas.createStream, body, 'generated-id');
}

function failure(fn: () => unknown): ServiceError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ServiceError);
    return err as ServiceError;
  }
  throw new Error('expected a validation failure');
}

function detailsOf(body: unknown, schema: Parameters<typeof parseLegacy>[0] = schemas.createStream): ValidationDetail[] {
  const err = failure(() => parseLegacy(schema, body, 'generated-id'));
  expect(err.status).toBe(422);
  expect(err.code).toBe('validation_error');
  return err.options.details as ValidationDetail[];
}

describe('bodies seen from real clients (spec/legacy-clients.md) parse', () => {
  const sdp = 'v=0\r\no=- 1 2 IN IP4 127.0.0.1\r\n';
  it('1. deprecated top-level offer with fps + sampling_ratio, no mode', () => {
    const parsed = parseCreate({
      webrtc: { type: 'offer', sdp },
      processing: { sampling_ratio: 0.1, fps: 30, clip_length_seconds: 1, delay_seconds: 1 },
      inference: { prompt: 'Describe', backend: 'svc', model: 'acme/vision-1' },
    });
    expect(parsed.mode).toBe('clip');
    expect(parsed.source).toBeNull();
    expect(parsed.webrtc).toEqual({ type: 'offer', sdp });
    expect(parsed.processing).toEqual({
      target_fps: null,
      sampling_ratio: 0.1,
      fps: 30,
      clip_length_seconds: 1,
      delay_seconds: 1,
    });
  });
  it('2a. webrtc source with mode', () => {
    const parsed = parseCreate({ ...clipBody, source: { type: 'webrtc', sdp } });
    expect(parsed.source).toEqual({ type: 'webrtc', sdp });
  });
  it('2b. vendor room source (the client room, subscribe token), no mode', () => {
    const parsed = parseCreate({
      source: { type: 'room', url: 'wss://rooms.example', token: 'sub-token' },
      processing: { target_fps: 1, clip_length_seconds: 5, delay_seconds: 5 },
      inference,
    });
    expect(parsed.source).toEqual({ type: 'room', url: 'wss://rooms.example', token: 'sub-token' });
    expect(parsed.mode).toBe('clip');
  });
  it('3. native: source omitted, null, or {type: native}', () => {
    expect(parseCreate(clipBody).source).toBeNull();
    expect(parseCreate({ ...clipBody, source: null, webrtc: null }).source).toBeNull();
    expect(parseCreate({ ...frameBody, source: { type: 'native' } }).source).toEqual({ type: 'native' });
  });
  it('4. frame mode with output schema and max_output_tokens', () => {
    const schema = { type: 'object', properties: { people: { type: 'integer' } }, required: ['people'] };
    const parsed = parseCreate({
      mode: 'frame',
      processing: { interval_seconds: 0.5 },
      inference: { prompt: 'Count people', model: 'acme/vision-1', output_schema_json: schema, max_output_tokens: 200 },
    });
    expect(parsed.mode).toBe('frame');
    expect(parsed.processing).toEqual({ interval_seconds: 0.5 });
    expect(parsed.inference).toEqual({
      prompt: 'Count people',
      model: 'acme/vision-1',
      backend: 'svc',
      output_schema_json: schema,
      max_output_tokens: 200,
    });
  });
  it('every optional field present as null', () => {
    const parsed = parseCreate({
      source: null,
      webrtc: null,
      mode: null,
      processing: { target_fps: null, sampling_ratio: null, fps: null, clip_length_seconds: 1, delay_seconds: 1 },
      inference: { ...inference, backend: 'thirdparty', output_schema_json: null, max_output_tokens: null },
      client: { request_id: null },
    });
    expect(parsed.mode).toBe('clip');
    expect(parsed.inference.backend).toBe('thirdparty');
    expect(parsed.client).toEqual({ request_id: null });
  });
  it('client request id is kept; client may be null or empty', () => {
    expect(parseCreate({ ...clipBody, client: { request_id: 'r-1' } }).client).toEqual({ request_id: 'r-1' });
    expect(parseCreate({ ...clipBody, client: {} }).client).toEqual({ request_id: null });
    expect(parseCreate({ ...clipBody, client: null }).client).toBeNull();
  });
});

describe('mode auto-detection and contradiction', () => {
  it('detects clip and frame from the keys that carry a value', () => {
    expect(detectProcessingKind({ clip_length_seconds: 1 })).toBe('clip');
    expect(detectProcessingKind({ interval_seconds: 1, target_fps: null })).toBe('frame');
    expect(detectProcessingKind({ interval_seconds: 1, delay_seconds: 1 })).toBe('mixed');
    expect(detectProcessingKind({})).toBe('unknown');
    expect(parseCreate(withPath(frameBody, 'mode', undefined)).mode).toBe('frame');
    expect(parseCreate(withPath(clipBody, 'mode', null)).mode).toBe('clip');
  });
  it.each([
    ['mode frame with a clip object', withPath(clipBody, 'mode', 'frame'), /mode is 'frame' but processing is a clip/],
    ['mode clip with a frame object', withPath(frameBody, 'mode', 'clip'), /mode is 'clip' but processing is a frame/],
    ['no mode, mixed object', { processing: { interval_seconds: 1, delay_seconds: 1, clip_length_seconds: 1 }, inference }, /mixes/],
    ['no mode, empty object', { processing: {}, inference }, /cannot tell clip from frame/],
    ['no mode, unknown keys only', { processing: { interval: 1 }, inference }, /cannot tell clip from frame/],
  ])('%s → 422 naming processing', (_name, body, msg) => {
    const details = detailsOf(body);
    expect(details).toEqual([{ loc: ['body', 'processing'], msg: expect.stringMatching(msg), type: 'value_error' }]);
  });
  it('an explicit mode parses a mixed object with that mode (the other keys are extra)', () => {
    const body = { mode: 'frame', processing: { interval_seconds: 1, target_fps: 5 }, inference };
    expect(detailsOf(body)).toEqual([
      { loc: ['body', 'processing', 'target_fps'], msg: 'Extra inputs are not permitted', type: 'extra_forbidden' },
    ]);
  });
  it('an explicit mode with an empty object reports the missing fields of that mode', () => {
    expect(detailsOf({ mode: 'clip', processing: {}, inference }).map((d) => [d.loc.join('.'), d.type])).toEqual([
      ['body.processing.clip_length_seconds', 'missing'],
      ['body.processing.delay_seconds', 'missing'],
    ]);
  });
});

/** [description, base body, path, value (undefined = delete), expected loc, expected type] */
type Row = [string, unknown, string, unknown, string, string];
const p = 'processing';
const rows: Row[] = [
  // top level
  ['extra top-level key', clipBody, 'extra', 1, 'body.extra', 'extra_forbidden'],
  ['processing missing', clipBody, p, undefined, 'body.processing', 'missing'],
  ['processing not an object', clipBody, p, 'clip', 'body.processing', 'model_type'],
  ['processing an array', clipBody, p, [], 'body.processing', 'model_type'],
  ['processing null', clipBody, p, null, 'body.processing', 'model_type'],
  ['inference missing', clipBody, 'inference', undefined, 'body.inference', 'missing'],
  ['inference not an object', clipBody, 'inference', [], 'body.inference', 'model_type'],
  ['mode unknown', clipBody, 'mode', 'video', 'body.mode', 'literal_error'],
  ['mode wrong type', clipBody, 'mode', 1, 'body.mode', 'literal_error'],
  // source
  ['source not an object', clipBody, 'source', 'webrtc', 'body.source', 'model_type'],
  ['source type unknown', clipBody, 'source', { type: 'rtmp', url: 'u' }, 'body.source.type', 'literal_error'],
  ['source type missing', clipBody, 'source', { sdp: 'x' }, 'body.source.type', 'missing'],
  ['webrtc source sdp missing', clipBody, 'source', { type: 'webrtc' }, 'body.source.sdp', 'missing'],
  ['webrtc source sdp empty', clipBody, 'source', { type: 'webrtc', sdp: '' }, 'body.source.sdp', 'string_too_short'],
  ['webrtc source sdp wrong type', clipBody, 'source', { type: 'webrtc', sdp: 1 }, 'body.source.sdp', 'string_type'],
  ['webrtc source extra key', clipBody, 'source', { type: 'webrtc', sdp: 'x', url: 'u' }, 'body.source.url', 'extra_forbidden'],
  ['room source url missing', clipBody, 'source', { type: 'room', token: 't' }, 'body.source.url', 'missing'],
  ['room source token missing', clipBody, 'source', { type: 'room', url: 'u' }, 'body.source.token', 'missing'],
  ['room source url empty', clipBody, 'source', { type: 'room', url: '', token: 't' }, 'body.source.url', 'string_too_short'],
  ['room source token empty', clipBody, 'source', { type: 'room', url: 'u', token: '' }, 'body.source.token', 'string_too_short'],
  ['room source extra key', clipBody, 'source', { type: 'room', url: 'u', token: 't', sdp: 's' }, 'body.source.sdp', 'extra_forbidden'],
  ['native source extra key', clipBody, 'source', { type: 'native', url: 'u' }, 'body.source.url', 'extra_forbidden'],
  // deprecated top-level offer
  ['webrtc not an object', clipBody, 'webrtc', 'offer', 'body.webrtc', 'model_type'],
  ['webrtc type not offer', clipBody, 'webrtc', { type: 'answer', sdp: 'x' }, 'body.webrtc.type', 'literal_error'],
  ['webrtc type missing', clipBody, 'webrtc', { sdp: 'x' }, 'body.webrtc.type', 'missing'],
  ['webrtc sdp missing', clipBody, 'webrtc', { type: 'offer' }, 'body.webrtc.sdp', 'missing'],
  ['webrtc sdp empty', clipBody, 'webrtc', { type: 'offer', sdp: '' }, 'body.webrtc.sdp', 'string_too_short'],
  ['webrtc extra key', clipBody, 'webrtc', { type: 'offer', sdp: 'x', x: 1 }, 'body.webrtc.x', 'extra_forbidden'],
  // clip processing
  ['target_fps below 1', clipBody, `${p}.target_fps`, 0, 'body.processing.target_fps', 'greater_than_equal'],
  ['target_fps above 30', clipBody, `${p}.target_fps`, 31, 'body.processing.target_fps', 'less_than_equal'],
  ['target_fps fractional', clipBody, `${p}.target_fps`, 1.5, 'body.processing.target_fps', 'int_type'],
  ['target_fps a string', clipBody, `${p}.target_fps`, '5', 'body.processing.target_fps', 'int_type'],
  [
    'clip_length_seconds below 0.1',
    clipBody,
    `${p}.clip_length_seconds`,
    0.09,
    'body.processing.clip_length_seconds',
    'greater_than_equal',
  ],
  ['clip_length_seconds above 60', clipBody, `${p}.clip_length_seconds`, 60.1, 'body.processing.clip_length_seconds', 'less_than_equal'],
  ['clip_length_seconds a string', clipBody, `${p}.clip_length_seconds`, '1', 'body.processing.clip_length_seconds', 'float_type'],
  ['clip_length_seconds null', clipBody, `${p}.clip_length_seconds`, null, 'body.processing.clip_length_seconds', 'float_type'],
  ['clip_length_seconds missing', clipBody, `${p}.clip_length_seconds`, undefined, 'body.processing.clip_length_seconds', 'missing'],
  ['delay_seconds zero', clipBody, `${p}.delay_seconds`, 0, 'body.processing.delay_seconds', 'greater_than'],
  ['delay_seconds negative', clipBody, `${p}.delay_seconds`, -1, 'body.processing.delay_seconds', 'greater_than'],
  ['delay_seconds a string', clipBody, `${p}.delay_seconds`, '2', 'body.processing.delay_seconds', 'float_type'],
  ['delay_seconds missing', clipBody, `${p}.delay_seconds`, undefined, 'body.processing.delay_seconds', 'missing'],
  ['clip extra key', clipBody, `${p}.extra`, 1, 'body.processing.extra', 'extra_forbidden'],
  ['target_fps with fps', clipBody, `${p}.fps`, 30, 'body.processing', 'value_error'],
  ['target_fps with sampling_ratio', clipBody, `${p}.sampling_ratio`, 0.5, 'body.processing', 'value_error'],
  ['fps without sampling_ratio', withPath(clipBody, `${p}.target_fps`, undefined), `${p}.fps`, 30, 'body.processing', 'value_error'],
  [
    'sampling_ratio without fps',
    withPath(clipBody, `${p}.target_fps`, undefined),
    `${p}.sampling_ratio`,
    0.5,
    'body.processing',
    'value_error',
  ],
  // the legacy pair (target_fps removed, fps present)
  ...((): Row[] => {
    const pair = withPath(withPath(clipBody, `${p}.target_fps`, undefined), `${p}.fps`, 30);
    const ratio = withPath(pair, `${p}.sampling_ratio`, 0.5);
    return [
      ['sampling_ratio below 0.1', pair, `${p}.sampling_ratio`, 0.09, 'body.processing.sampling_ratio', 'greater_than_equal'],
      ['sampling_ratio above 1', pair, `${p}.sampling_ratio`, 1.01, 'body.processing.sampling_ratio', 'less_than_equal'],
      ['sampling_ratio a string', pair, `${p}.sampling_ratio`, 'half', 'body.processing.sampling_ratio', 'float_type'],
      ['fps zero', ratio, `${p}.fps`, 0, 'body.processing.fps', 'greater_than'],
      ['fps negative', ratio, `${p}.fps`, -30, 'body.processing.fps', 'greater_than'],
      ['fps non-integer (old clients: 29.97)', ratio, `${p}.fps`, 29.97, 'body.processing.fps', 'int_type'],
      ['fps a string', ratio, `${p}.fps`, '30', 'body.processing.fps', 'int_type'],
    ];
  })(),
  // frame processing
  ['interval_seconds zero', frameBody, `${p}.interval_seconds`, 0, 'body.processing.interval_seconds', 'greater_than'],
  ['interval_seconds negative', frameBody, `${p}.interval_seconds`, -0.5, 'body.processing.interval_seconds', 'greater_than'],
  ['interval_seconds above 60', frameBody, `${p}.interval_seconds`, 60.5, 'body.processing.interval_seconds', 'less_than_equal'],
  ['interval_seconds a string', frameBody, `${p}.interval_seconds`, '1', 'body.processing.interval_seconds', 'float_type'],
  ['interval_seconds missing (mode frame)', frameBody, `${p}.interval_seconds`, undefined, 'body.processing.interval_seconds', 'missing'],
  ['frame extra key', frameBody, `${p}.extra`, 1, 'body.processing.extra', 'extra_forbidden'],
  // inference
  ['prompt missing', clipBody, 'inference.prompt', undefined, 'body.inference.prompt', 'missing'],
  ['prompt empty', clipBody, 'inference.prompt', '', 'body.inference.prompt', 'string_too_short'],
  ['prompt wrong type', clipBody, 'inference.prompt', 7, 'body.inference.prompt', 'string_type'],
  ['model missing', clipBody, 'inference.model', undefined, 'body.inference.model', 'missing'],
  ['model empty', clipBody, 'inference.model', '', 'body.inference.model', 'string_too_short'],
  ['model wrong type', clipBody, 'inference.model', null, 'body.inference.model', 'string_type'],
  ['backend unknown', clipBody, 'inference.backend', 'openai', 'body.inference.backend', 'literal_error'],
  ['backend null', clipBody, 'inference.backend', null, 'body.inference.backend', 'literal_error'],
  ['output_schema_json a string', clipBody, 'inference.output_schema_json', '{}', 'body.inference.output_schema_json', 'dict_type'],
  ['output_schema_json an array', clipBody, 'inference.output_schema_json', [], 'body.inference.output_schema_json', 'dict_type'],
  ['max_output_tokens zero', clipBody, 'inference.max_output_tokens', 0, 'body.inference.max_output_tokens', 'greater_than'],
  ['max_output_tokens fractional', clipBody, 'inference.max_output_tokens', 1.5, 'body.inference.max_output_tokens', 'int_type'],
  ['max_output_tokens a string', clipBody, 'inference.max_output_tokens', '10', 'body.inference.max_output_tokens', 'int_type'],
  ['inference extra key', clipBody, 'inference.temperature', 0.2, 'body.inference.temperature', 'extra_forbidden'],
  // client
  ['client not an object', clipBody, 'client', 'abc', 'body.client', 'model_type'],
  ['client request_id wrong type', clipBody, 'client', { request_id: 5 }, 'body.client.request_id', 'string_type'],
  ['client extra key', clipBody, 'client', { request_id: 'r', trace: 1 }, 'body.client.trace', 'extra_forbidden'],
];

describe('every create constraint rejects with its loc and type', () => {
  it.each(rows)('%s', (_name, base, path, value, loc, type) => {
    const details = detailsOf(withPath(base, path, value));
    expect(details.map((d) => [d.loc.join('.'), d.type])).toEqual([[loc, type]]);
    expect(details[0]!.loc[0]).toBe('body');
    expect(details[0]!.msg.length).toBeGreaterThan(0);
  });

  it.each([
    ['target_fps 1', `${p}.target_fps`, 1],
    ['target_fps 30', `${p}.target_fps`, 30],
    ['clip_length_seconds 0.1', `${p}.clip_length_seconds`, 0.1],
    ['clip_length_seconds 60', `${p}.clip_length_seconds`, 60],
    ['delay_seconds tiny', `${p}.delay_seconds`, 0.001],
    ['delay_seconds large', `${p}.delay_seconds`, 3600],
    ['target_fps omitted (defaults later)', `${p}.target_fps`, undefined],
  ])('accepts the clip bound %s', (_name, path, value) => {
    expect(parseCreate(withPath(clipBody, path, value)).mode).toBe('clip');
  });

  it.each([0.1, 1])('accepts sampling_ratio %s with fps', (ratio) => {
    const body = { processing: { fps: 30, sampling_ratio: ratio, clip_length_seconds: 1, delay_seconds: 1 }, inference };
    expect(parseCreate(body).processing).toMatchObject({ fps: 30, sampling_ratio: ratio });
  });

  it.each([0.001, 60])('accepts interval_seconds %s', (interval) => {
    expect(parseCreate(withPath(frameBody, `${p}.interval_seconds`, interval)).processing).toEqual({ interval_seconds: interval });
  });

  it('source together with the top-level webrtc offer → 422 on webrtc', () => {
    const body = { ...clipBody, source: { type: 'native' }, webrtc: { type: 'offer', sdp: 'x' } };
    expect(detailsOf(body)).toEqual([{ loc: ['body', 'webrtc'], msg: expect.stringMatching(/not both/), type: 'value_error' }]);
  });

  it('a missing or non-object body', () => {
    expect(detailsOf(undefined)).toEqual([{ loc: ['body'], msg: 'Field required', type: 'missing' }]);
    expect(detailsOf('text')).toEqual([{ loc: ['body'], msg: 'Input should be an object', type: 'model_type' }]);
    expect(detailsOf([clipBody])[0]).toMatchObject({ loc: ['body'], type: 'model_type' });
  });

  it('reports head and processing issues together, with a summarising message', () => {
    const body = { mode: 'clip', processing: { target_fps: 99, clip_length_seconds: 1, delay_seconds: 1 }, inference: {}, x: 1 };
    const err = failure(() => parseCreate(body));
    const details = err.options.details as ValidationDetail[];
    expect(details.map((d) => d.loc.join('.')).sort()).toEqual(
      ['body.inference.model', 'body.inference.prompt', 'body.processing.target_fps', 'body.x'].sort(),
    );
    expect(err.message).toBe(`${summarize(details.slice(0, 3))} (and 1 more)`);
    expect(err.message).toMatch(/^[a-z_.]+: /);
  });

  it('pydantic-style messages', () => {
    const msg = (path: string, value: unknown, base: unknown = clipBody) => detailsOf(withPath(base, path, value))[0]!.msg;
    expect(msg(`${p}.target_fps`, 31)).toBe('Input should be less than or equal to 30');
    expect(msg(`${p}.clip_length_seconds`, 0.05)).toBe('Input should be greater than or equal to 0.1');
    expect(msg(`${p}.delay_seconds`, 0)).toBe('Input should be greater than 0');
    expect(msg('inference.prompt', '')).toBe('String should have at least 1 character');
    expect(msg('mode', 'x')).toBe("Input should be 'clip' or 'frame'");
    expect(msg('source', { type: 'x' })).toBe("Input should be 'webrtc', 'room' or 'native'");
    expect(msg('inference.backend', 'x')).toBe("Input should be 'thirdparty' or 'svc'");
    expect(msg(`${p}.target_fps`, 2.5)).toBe('Input should be a valid integer, got a number with a fractional part');
  });
});

describe('prompt patch and feedback bodies', () => {
  it('accept valid bodies', () => {
    expect(parseLegacy(schemas.promptPatch, { prompt: 'new' }, 'g')).toEqual({ prompt: 'new' });
    expect(parseLegacy(schemas.feedback, { rating: 1, category: 'accuracy', feedback: '' }, 'g')).toEqual({
      rating: 1,
      category: 'accuracy',
      feedback: '',
    });
    expect(parseLegacy(schemas.feedback, { rating: 5, category: 'c', feedback: 'great' }, 'g').rating).toBe(5);
  });

  const prompt = { prompt: 'p' };
  const fb = { rating: 3, category: 'latency', feedback: 'slow' };
  it.each<[string, unknown, string, unknown, string, string]>([
    ['prompt missing', prompt, 'prompt', undefined, 'body.prompt', 'missing'],
    ['prompt empty', prompt, 'prompt', '', 'body.prompt', 'string_too_short'],
    ['prompt wrong type', prompt, 'prompt', ['p'], 'body.prompt', 'string_type'],
    ['prompt extra key', prompt, 'model', 'm', 'body.model', 'extra_forbidden'],
  ])('prompt patch: %s', (_n, base, path, value, loc, type) => {
    const details = detailsOf(withPath(base, path, value), schemas.promptPatch);
    expect(details.map((d) => [d.loc.join('.'), d.type])).toEqual([[loc, type]]);
  });
  it('feedback: the provider range 0..10 inclusive, and the text optional (default "")', () => {
    expect(parseLegacy(schemas.feedback, { rating: 0, category: 'c' }, 'g')).toEqual({ rating: 0, category: 'c', feedback: '' });
    expect(parseLegacy(schemas.feedback, { rating: 10, category: 'c', feedback: 'x' }, 'g')).toEqual({
      rating: 10,
      category: 'c',
      feedback: 'x',
    });
  });
  it('prompt patch: no body', () => {
    expect(detailsOf(undefined, schemas.promptPatch)).toEqual([{ loc: ['body'], msg: 'Field required', type: 'missing' }]);
  });

  it.each<[string, unknown, string, unknown, string, string]>([
    ['rating below 0', fb, 'rating', -1, 'body.rating', 'greater_than_equal'],
    ['rating above 10', fb, 'rating', 11, 'body.rating', 'less_than_equal'],
    ['rating fractional', fb, 'rating', 4.5, 'body.rating', 'int_type'],
    ['rating a string', fb, 'rating', '5', 'body.rating', 'int_type'],
    ['rating missing', fb, 'rating', undefined, 'body.rating', 'missing'],
    ['category empty', fb, 'category', '', 'body.category', 'string_too_short'],
    ['category missing', fb, 'category', undefined, 'body.category', 'missing'],
    ['category wrong type', fb, 'category', 1, 'body.category', 'string_type'],
    ['feedback wrong type', fb, 'feedback', null, 'body.feedback', 'string_type'],
    ['extra key', fb, 'stream_id', 'x', 'body.stream_id', 'extra_forbidden'],
  ])('feedback: %s', (_n, base, path, value, loc, type) => {
    const details = detailsOf(withPath(base, path, value), schemas.feedback);
    expect(details.map((d) => [d.loc.join('.'), d.type])).toEqual([[loc, type]]);
  });
});

describe('legacy error bodies and request ids', () => {
  it('an invalid body renders the legacy 422 shape with the client request id', () => {
    const body = { ...clipBody, mode: 'video', client: { request_id: 'client-42' } };
    const err = failure(() => parseCreate(body));
    const requestId = legacyErrorRequestId(err, 'fallback');
    expect(requestId).toBe('client-42');
    expect(err.toLegacyBody(requestId)).toEqual({
      error: 'validation_error',
      message: "mode: Input should be 'clip' or 'frame'",
      request_id: 'client-42',
      details: [{ loc: ['body', 'mode'], msg: "Input should be 'clip' or 'frame'", type: 'literal_error' }],
    });
  });

  it('reads client.request_id even when the client object itself is invalid', () => {
    const err = failure(() => parseCreate({ ...clipBody, client: { request_id: 'r-9', extra: true } }));
    expect(legacyErrorRequestId(err, null)).toBe('r-9');
  });

  it('falls back to the generated id', () => {
    expect(
      legacyErrorRequestId(
        failure(() => parseCreate({})),
        null,
      ),
    ).toBe('generated-id');
    expect(
      legacyErrorRequestId(
        failure(() => parseCreate({ client: { request_id: 7 } })),
        null,
      ),
    ).toBe('generated-id');
    expect(legacyRequestId(null, 'gen')).toBe('gen');
    expect(legacyRequestId({ client: { request_id: '' } }, 'gen')).toBe('gen');
    expect(legacyRequestId({ client: { request_id: 'abc' } }, 'gen')).toBe('abc');
    expect(legacyErrorRequestId(legacyError(404, 'stream_not_found', 'gone'), 'other')).toBe('other');
  });

  it('legacyError and legacyJsonInvalid use the legacy shape', () => {
    const err = legacyError(429, 'concurrent_stream_limit', 'Limit of 5 concurrent streams reached');
    expect(err.status).toBe(429);
    expect(err.toBody('r')).toEqual({
      error: 'concurrent_stream_limit',
      message: 'Limit of 5 concurrent streams reached',
      request_id: 'r',
      details: null,
    });
    const json = legacyJsonInvalid('Unexpected token } in JSON at position 9', 'r2');
    expect(json.status).toBe(400);
    expect(json.toLegacyBody(legacyErrorRequestId(json, null))).toEqual({
      error: 'invalid_body',
      message: 'Invalid JSON: Unexpected token } in JSON at position 9',
      request_id: 'r2',
      details: [{ loc: ['body'], msg: 'Invalid JSON: Unexpected token } in JSON at position 9', type: 'json_invalid' }],
    });
  });
});

describe('a custom brand and vendor', () => {
  const acme = createLegacySchemas(brandOf({ brand: 'acme', roomVendor: 'lk' }));
  const parse = (body: unknown) => parseLegacy(acme.createStream, body, 'g');
  it('accepts the vendor source type and the brand backend, rejects the neutral tokens', () => {
    const parsed = parse({ ...clipBody, source: { type: 'lk', url: 'wss://lk', token: 't' } });
    expect(parsed.source).toEqual({ type: 'room', url: 'wss://lk', token: 't' });
    expect(parsed.inference.backend).toBe('acme');
    expect(parse(withPath(clipBody, 'inference.backend', 'acme')).inference.backend).toBe('acme');
    const roomErr = failure(() => parse({ ...clipBody, source: { type: 'room', url: 'u', token: 't' } }));
    expect(roomErr.options.details).toEqual([
      { loc: ['body', 'source', 'type'], msg: "Input should be 'webrtc', 'lk' or 'native'", type: 'literal_error' },
    ]);
    const svcErr = failure(() => parse(withPath(clipBody, 'inference.backend', 'svc')));
    expect(svcErr.options.details).toEqual([
      { loc: ['body', 'inference', 'backend'], msg: "Input should be 'thirdparty' or 'acme'", type: 'literal_error' },
    ]);
  });
  it('the provider profile: backends gemini and overshoot, thirdparty refused; the default profile the other way round', () => {
    const ovs = createLegacySchemas(
      brandOf({ brand: 'overshoot', brandAbbreviation: 'ovs', thirdPartyBackend: 'gemini', roomVendor: 'livekit' }),
    );
    const parseOvs = (body: unknown) => parseLegacy(ovs.createStream, body, 'g');
    expect(parseOvs(withPath(clipBody, 'inference.backend', 'gemini')).inference.backend).toBe('gemini');
    expect(parseOvs(withPath(clipBody, 'inference.backend', 'overshoot')).inference.backend).toBe('overshoot');
    expect(parseOvs(clipBody).inference.backend).toBe('overshoot');
    expect(failure(() => parseOvs(withPath(clipBody, 'inference.backend', 'thirdparty'))).options.details).toEqual([
      { loc: ['body', 'inference', 'backend'], msg: "Input should be 'gemini' or 'overshoot'", type: 'literal_error' },
    ]);
    expect(parseCreate(withPath(clipBody, 'inference.backend', 'thirdparty')).inference.backend).toBe('thirdparty');
    expect(() => parseCreate(withPath(clipBody, 'inference.backend', 'gemini'))).toThrow();
  });
  it('refuses a vendor token that would shadow a legacy name', () => {
    expect(() => createLegacySchemas(brandOf({ brand: 'svc', roomVendor: 'webrtc' }))).toThrow(/collides/);
  });
});

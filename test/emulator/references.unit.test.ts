import { FrameBuffer } from '../../src/emulator/frames/buffer';
import { renderPatternRgb } from '../../src/emulator/frames/pattern';
import { parseReference, resolveImage, resolveVideo } from '../../src/emulator/references';
import type { ImageReference, PartKind, StreamReference, VideoReference } from '../../src/emulator/references';
import { ServiceError } from '../../src/lib/errors';

const ID = '3f2b8c1e-7d4a-4b6e-9c2f-0a1b2c3d4e5f';
const LOC = ['body', 'messages', '0', 'content', '1', 'image_url', 'url'];
const T0 = 1_700_000_000_000;

function parse(query: string, kind: PartKind = 'image', scheme = 'svc', id = ID): ReturnType<typeof parseReference> {
  return parseReference(`${scheme}://streams/${id}?${query}`, kind, 'svc', LOC);
}
function ok<T extends StreamReference>(query: string, kind: PartKind): T {
  const r = parse(query, kind);
  if (!r.ok) throw new Error(`expected ${query} to parse: ${JSON.stringify(r.problems)}`);
  return r.value as T;
}
const img = (q: string) => ok<ImageReference>(q, 'image');
const vid = (q: string) => ok<VideoReference>(q, 'video');

/** A buffer holding `n` frames at `fps` from T0; `clock.now` starts just after the last frame. */
async function bufferWith(n: number, fps = 10, retentionMs = 600_000) {
  const clock = { now: T0 + Math.round(((n - 1) * 1000) / fps) + 20 };
  const buf = new FrameBuffer({ retentionMs, maxBytes: 1 << 30, storeWidth: 64, jpegQuality: 50, fpsWindowMs: 5000, now: () => clock.now });
  const add = async (count: number) => {
    const start = buf.nextIndex;
    for (let i = start; i < start + count; i++) {
      void buf.ingest({ width: 16, height: 12, format: 'rgb', data: renderPatternRgb(i, 16, 12) }, T0 + Math.round((i * 1000) / fps));
    }
    await buf.drain();
  };
  await add(n);
  return { buf, clock, add };
}

function errorOf(fn: () => unknown): ServiceError {
  try {
    fn();
  } catch (err) {
    if (err instanceof ServiceError) return err;
    throw err;
  }
  throw new Error('expected a ServiceError');
}

const indices = (frames: { index: number }[]) => frames.map((f) => f.index);

describe('parseReference: valid references', () => {
  it('reads an image anchor with the contract defaults', () => {
    expect(img('frame_index=-1')).toEqual({
      kind: 'image',
      streamId: ID,
      anchor: { axis: 'frame_index', value: -1 },
      toleranceMs: 100,
      direction: 'nearest',
    });
    expect(img('timestamp_ms=1500&tolerance_ms=40&direction=backward')).toMatchObject({
      anchor: { axis: 'timestamp_ms', value: 1500 },
      toleranceMs: 40,
      direction: 'backward',
    });
    expect(img('offset_ms=-250')).toMatchObject({ anchor: { axis: 'offset_ms', value: -250 } });
  });

  it('reads a video window, mixed anchors and max_fps; the end defaults to the live edge', () => {
    expect(vid('start_offset_ms=-5000')).toEqual({ kind: 'video', streamId: ID, start: { axis: 'offset_ms', value: -5000 }, maxFps: 1 });
    expect(vid('start_offset_ms=-5000&end_frame_index=10&max_fps=0.5')).toMatchObject({
      start: { axis: 'offset_ms', value: -5000 },
      end: { axis: 'frame_index', value: 10 },
      maxFps: 0.5,
    });
    expect(vid('start_timestamp_ms=0&end_offset_ms=-1000&max_fps=2.5e0').maxFps).toBe(2.5);
  });

  it('normalises the stream id to lower case and accepts percent-encoded values', () => {
    expect(ok(`frame_index=%2D3`, 'image')).toMatchObject({ anchor: { value: -3 } });
    const r = parseReference(`svc://streams/${ID.toUpperCase()}?frame_index=1`, 'image', 'svc', LOC);
    expect(r.ok && r.value.streamId).toBe(ID);
  });

  it('uses the configured brand scheme, never a hard-coded one', () => {
    expect(parseReference(`acme://streams/${ID}?frame_index=1`, 'image', 'acme', LOC).ok).toBe(true);
    const r = parseReference(`svc://streams/${ID}?frame_index=1`, 'image', 'acme', LOC);
    expect(r.ok ? null : r.problems[0]!.type).toBe('url_scheme');
  });
});

describe('parseReference: every 422 of the contract', () => {
  const cases: [string, string, PartKind, string][] = [
    // [name, query or full url, kind, expected detail type]
    ['repeated key (rule 4)', 'frame_index=1&frame_index=2', 'image', 'duplicate_parameter'],
    ['repeated tolerance', 'frame_index=1&tolerance_ms=5&tolerance_ms=5', 'image', 'duplicate_parameter'],
    ['repeated max_fps', 'start_offset_ms=-1&max_fps=1&max_fps=2', 'video', 'duplicate_parameter'],
    ['two image anchors (rule 5)', 'frame_index=1&timestamp_ms=5', 'image', 'multiple_anchors'],
    ['three image anchors', 'frame_index=1&timestamp_ms=5&offset_ms=-1', 'image', 'multiple_anchors'],
    ['two start anchors (rule 5)', 'start_offset_ms=-1&start_frame_index=3', 'video', 'multiple_anchors'],
    ['two end anchors', 'start_frame_index=0&end_offset_ms=0&end_frame_index=3', 'video', 'multiple_anchors'],
    ['no image anchor', 'tolerance_ms=50', 'image', 'missing'],
    ['empty query', '', 'image', 'missing'],
    ['no start anchor', 'end_frame_index=3', 'video', 'missing'],
    ['unknown parameter', 'frame_index=1&foo=2', 'image', 'extra_forbidden'],
    ['video parameter in an image part', 'start_offset_ms=-1000', 'image', 'extra_forbidden'],
    ['image parameter in a video part', 'start_frame_index=0&frame_index=1', 'video', 'extra_forbidden'],
    ['max_fps in an image part', 'frame_index=1&max_fps=1', 'image', 'extra_forbidden'],
    ['tolerance in a video part', 'start_frame_index=1&tolerance_ms=1', 'video', 'extra_forbidden'],
    ['non-integer index', 'frame_index=abc', 'image', 'int_parsing'],
    ['fractional index', 'frame_index=1.5', 'image', 'int_parsing'],
    ['empty index', 'frame_index=', 'image', 'int_parsing'],
    ['key without value', 'frame_index', 'image', 'int_parsing'],
    ['unsafe integer', 'frame_index=99999999999999999999', 'image', 'int_parsing'],
    ['hex index', 'start_frame_index=0x10', 'video', 'int_parsing'],
    ['fractional offset', 'start_offset_ms=-1.5', 'video', 'int_parsing'],
    ['tolerance 0', 'timestamp_ms=1&tolerance_ms=0', 'image', 'greater_than'],
    ['negative tolerance', 'timestamp_ms=1&tolerance_ms=-5', 'image', 'greater_than'],
    ['fractional tolerance', 'timestamp_ms=1&tolerance_ms=1.5', 'image', 'int_parsing'],
    ['unknown direction', 'timestamp_ms=1&direction=sideways', 'image', 'enum'],
    ['negative timestamp', 'timestamp_ms=-1', 'image', 'greater_than_equal'],
    ['negative start timestamp', 'start_timestamp_ms=-1', 'video', 'greater_than_equal'],
    ['max_fps 0', 'start_offset_ms=-1&max_fps=0', 'video', 'greater_than'],
    ['negative max_fps', 'start_offset_ms=-1&max_fps=-1', 'video', 'greater_than'],
    ['max_fps word', 'start_offset_ms=-1&max_fps=fast', 'video', 'float_parsing'],
    ['max_fps NaN', 'start_offset_ms=-1&max_fps=NaN', 'video', 'float_parsing'],
    ['max_fps Infinity', 'start_offset_ms=-1&max_fps=Infinity', 'video', 'float_parsing'],
    ['bad percent-encoding', 'frame_index=%ZZ', 'image', 'url_parsing'],
    ['wrong scheme', `url:http://streams/${ID}?frame_index=1`, 'image', 'url_scheme'],
    ['data url', 'url:data:image/jpeg;base64,AAAA', 'image', 'url_scheme'],
    ['missing slashes', `url:svc:/streams/${ID}?frame_index=1`, 'image', 'url_scheme'],
    ['wrong host', `url:svc://stream/${ID}?frame_index=1`, 'image', 'url_parsing'],
    ['extra path segment', `url:svc://streams/${ID}/frames?frame_index=1`, 'image', 'url_parsing'],
    ['no stream id', 'url:svc://streams?frame_index=1', 'image', 'url_parsing'],
    ['fragment', `url:svc://streams/${ID}?frame_index=1#x`, 'image', 'url_parsing'],
    ['non-UUID id', 'url:svc://streams/not-a-uuid?frame_index=1', 'image', 'uuid_parsing'],
    ['empty id', 'url:svc://streams/?start_offset_ms=-1', 'video', 'uuid_parsing'],
  ];

  it.each(cases)('%s → 422 detail %s', (_name, q, kind, type) => {
    const url = q.startsWith('url:') ? q.slice(4) : `svc://streams/${ID}?${q}`;
    const r = parseReference(url, kind, 'svc', LOC);
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.problems.map((p) => p.type)).toContain(type);
    for (const p of r.problems) {
      expect(p.loc).toEqual(LOC);
      expect(p.msg.length).toBeGreaterThan(5);
    }
  });

  it('reports every problem of one reference, not only the first', () => {
    const r = parse('timestamp_ms=x&direction=up&foo=1', 'image');
    expect(r.ok ? [] : r.problems.map((p) => p.type).sort()).toEqual(['enum', 'extra_forbidden', 'int_parsing']);
  });

  it('tolerance_ms and direction are ignored (not validated) when frame_index is set, as the contract says', () => {
    for (const q of [
      'frame_index=3&tolerance_ms=0',
      'frame_index=3&tolerance_ms=abc',
      'frame_index=-1&direction=sideways&tolerance_ms=-5',
    ]) {
      expect(img(q)).toMatchObject({ anchor: { axis: 'frame_index' }, toleranceMs: 100, direction: 'nearest' });
    }
    // A repeated key is still rule 4, whatever it names.
    expect(parse('frame_index=3&tolerance_ms=5&tolerance_ms=5', 'image')).toMatchObject({
      ok: false,
      problems: [{ type: 'duplicate_parameter' }],
    });
  });
});

describe('resolveImage', () => {
  it('rule 1: negative indices and offsets follow the live edge at request time', async () => {
    const { buf, clock, add } = await bufferWith(50); // frames 0..49 at 0..4900 ms; now = 4920 ms
    const latest = img('frame_index=-1');
    const secondAgo = img('offset_ms=-1000');
    expect(resolveImage(latest, buf, clock.now).index).toBe(49);
    expect(resolveImage(img('frame_index=-3'), buf, clock.now).index).toBe(47);
    expect(resolveImage(secondAgo, buf, clock.now).index).toBe(39);
    await add(10); // frames 50..59, up to 5900 ms
    clock.now += 1000;
    expect(resolveImage(latest, buf, clock.now).index).toBe(59);
    expect(resolveImage(secondAgo, buf, clock.now).index).toBe(49);
  });

  it('resolves absolute indices and timestamps exactly', async () => {
    const { buf, clock } = await bufferWith(50);
    expect(resolveImage(img('frame_index=17'), buf, clock.now).index).toBe(17);
    expect(resolveImage(img('timestamp_ms=2300'), buf, clock.now).index).toBe(23);
    expect(resolveImage(img('timestamp_ms=0'), buf, clock.now).index).toBe(0);
  });

  it('snaps within tolerance_ms following direction', async () => {
    const { buf, clock } = await bufferWith(50); // one frame every 100 ms
    const at = (q: string) => resolveImage(img(q), buf, clock.now).index;
    expect(at('timestamp_ms=1040')).toBe(10);
    expect(at('timestamp_ms=1060')).toBe(11);
    expect(at('timestamp_ms=1040&direction=forward')).toBe(11);
    expect(at('timestamp_ms=1060&direction=backward')).toBe(10);
    expect(at('timestamp_ms=1040&tolerance_ms=50&direction=backward')).toBe(10);
    expect(at('timestamp_ms=1040&tolerance_ms=250&direction=forward')).toBe(11);
    // frame_index ignores tolerance and direction
    expect(at('frame_index=12&tolerance_ms=1&direction=backward')).toBe(12);
    // no frame within tolerance inside the buffer: nothing was produced there
    for (const q of [
      'timestamp_ms=1050&tolerance_ms=30',
      'timestamp_ms=1040&tolerance_ms=50&direction=forward',
      'timestamp_ms=1060&tolerance_ms=50&direction=backward',
    ]) {
      const e = errorOf(() => at(q));
      expect([e.status, e.code, e.shape]).toEqual([422, 'frame_not_yet_produced', 'stream']);
    }
  });

  it('rule 3: an index past the last frame and a future time fail with 422 frame_not_yet_produced', async () => {
    const { buf, clock } = await bufferWith(50);
    for (const q of ['frame_index=50', 'frame_index=1000', 'offset_ms=6000', 'timestamp_ms=9000']) {
      const e = errorOf(() => resolveImage(img(q), buf, clock.now));
      expect([e.status, e.code]).toEqual([422, 'frame_not_yet_produced']);
      expect(e.toBody()).toMatchObject({ detail: { error: { type: 'stream_error', code: 'frame_not_yet_produced' } } });
    }
    // a time just past the last frame, within tolerance of it, still snaps to it
    expect(resolveImage(img('offset_ms=-1'), buf, clock.now).index).toBe(49);
  });

  it('a non-negative offset_ms counts forward from the oldest retained frame, a negative one back from now', async () => {
    const { buf, clock } = await bufferWith(50, 10, 2000); // at now (4920 ms) frames 30..49 (2920..4900 ms) are retained
    buf.evict(clock.now);
    const at = (q: string) => resolveImage(img(q), buf, clock.now).index;
    expect(at('offset_ms=0')).toBe(30);
    expect(at('offset_ms=1000')).toBe(40);
    expect(at('offset_ms=-1000')).toBe(39);
    // more than the retained span ahead of the oldest frame is the future
    const e = errorOf(() => at('offset_ms=3000'));
    expect([e.status, e.code]).toEqual([422, 'frame_not_yet_produced']);
  });

  it('rule 2: indices older than the buffer clamp up; older times are frame_evicted', async () => {
    const { buf, clock } = await bufferWith(50, 10, 2000); // at now (4920 ms) frames before 2920 ms are evicted
    buf.evict(clock.now);
    expect(buf.oldestFrame?.index).toBe(30);
    expect(resolveImage(img('frame_index=0'), buf, clock.now).index).toBe(30);
    expect(resolveImage(img('frame_index=-1000'), buf, clock.now).index).toBe(30);
    expect(resolveImage(img('timestamp_ms=2950'), buf, clock.now).index).toBe(30); // within tolerance
    for (const q of ['timestamp_ms=1000', 'offset_ms=-4000', 'offset_ms=-100000']) {
      const e = errorOf(() => resolveImage(img(q), buf, clock.now));
      expect([e.status, e.code, e.shape]).toEqual([422, 'frame_evicted', 'stream']);
    }
  });

  it('frame_evicted once every frame aged out of retention', async () => {
    const { buf, clock } = await bufferWith(10, 10, 2000);
    clock.now += 60_000;
    const e = errorOf(() => resolveImage(img('frame_index=-1'), buf, clock.now));
    expect([e.status, e.code]).toEqual([422, 'frame_evicted']);
  });

  it('rule 6: before the first frame every reference fails with 422 frame_not_yet_produced', async () => {
    const { buf, clock } = await bufferWith(0);
    for (const resolve of [
      () => resolveImage(img('frame_index=-1'), buf, clock.now),
      () => resolveImage(img('offset_ms=0'), buf, clock.now),
      () => resolveVideo(vid('start_offset_ms=0'), buf, clock.now),
    ]) {
      const e = errorOf(resolve);
      expect([e.status, e.code, e.shape]).toEqual([422, 'frame_not_yet_produced', 'stream']);
    }
  });
});

describe('resolveVideo', () => {
  it('samples back from the newest frame at max_fps; halving max_fps halves the frames', async () => {
    const { buf, clock } = await bufferWith(200); // 20 s at 10 fps; now = 19 920 ms
    const count = (fps: number) => resolveVideo(vid(`start_offset_ms=-10000&max_fps=${fps}`), buf, clock.now).length;
    expect(count(2)).toBe(20);
    expect(count(1)).toBe(10);
    expect(count(0.5)).toBe(5);
    expect(count(0.25)).toBe(3);
    const frames = resolveVideo(vid('start_offset_ms=-10000'), buf, clock.now);
    expect(indices(frames)).toEqual([109, 119, 129, 139, 149, 159, 169, 179, 189, 199]);
    for (let i = 1; i < frames.length; i++) expect(frames[i]!.streamTimeMs - frames[i - 1]!.streamTimeMs).toBeGreaterThanOrEqual(1000);
  });

  it('defaults to 1 fps and to the live edge; an offset start of 0 is the start of the buffer', async () => {
    const { buf, clock } = await bufferWith(50);
    expect(indices(resolveVideo(vid('start_offset_ms=-2000'), buf, clock.now))).toEqual([39, 49]);
    expect(indices(resolveVideo(vid('start_offset_ms=0'), buf, clock.now))).toEqual([9, 19, 29, 39, 49]);
    expect(indices(resolveVideo(vid('start_frame_index=-10&max_fps=10'), buf, clock.now))).toEqual([
      40, 41, 42, 43, 44, 45, 46, 47, 48, 49,
    ]);
    expect(indices(resolveVideo(vid('start_timestamp_ms=4500&max_fps=5'), buf, clock.now))).toEqual([45, 47, 49]);
  });

  it('mixes anchor kinds in one part; the end anchor is exclusive', async () => {
    const { buf, clock } = await bufferWith(50); // frames 0..49 at 0..4900 ms; now = 4920 ms
    // end_frame_index=-11 is frame 39: the window ends before it
    expect(indices(resolveVideo(vid('start_offset_ms=-3000&end_frame_index=-11'), buf, clock.now))).toEqual([28, 38]);
    expect(indices(resolveVideo(vid('start_frame_index=5&end_timestamp_ms=2500'), buf, clock.now))).toEqual([14, 24]);
    expect(indices(resolveVideo(vid('start_frame_index=5&end_timestamp_ms=2501'), buf, clock.now))).toEqual([5, 15, 25]);
    expect(indices(resolveVideo(vid('start_timestamp_ms=1000&end_offset_ms=-2920&max_fps=2'), buf, clock.now))).toEqual([14, 19]);
    expect(indices(resolveVideo(vid('start_frame_index=3&end_frame_index=4'), buf, clock.now))).toEqual([3]);
    expect(indices(resolveVideo(vid('start_frame_index=40&end_frame_index=50&max_fps=10'), buf, clock.now))).toEqual([
      40, 41, 42, 43, 44, 45, 46, 47, 48, 49,
    ]);
    // non-negative end offsets count from the oldest retained frame, like start offsets
    expect(indices(resolveVideo(vid('start_offset_ms=0&end_offset_ms=2000&max_fps=2'), buf, clock.now))).toEqual([4, 9, 14, 19]);
  });

  it('offsets on a stream with evicted frames: non-negative from the oldest retained frame, negative from now', async () => {
    const { buf, clock } = await bufferWith(50, 10, 2000); // at now (4920 ms) frames 30..49 (2920..4900 ms) are retained
    buf.evict(clock.now);
    const at = (q: string) => indices(resolveVideo(vid(q), buf, clock.now));
    expect(at('start_offset_ms=0&max_fps=10').slice(0, 2)).toEqual([30, 31]);
    expect(at('start_offset_ms=500&end_offset_ms=1000&max_fps=10')).toEqual([35, 36, 37, 38, 39]);
    expect(at('start_offset_ms=1000&end_offset_ms=-500&max_fps=2.5')).toEqual([40, 44]);
    expect(at('start_offset_ms=-1000&max_fps=5')).toEqual([41, 43, 45, 47, 49]);
    // an end offset of 0 is the oldest retained frame: the window would end before it starts
    const e = errorOf(() => resolveVideo(vid('start_offset_ms=-1000&end_offset_ms=0'), buf, clock.now, LOC));
    expect([e.status, e.shape]).toEqual([422, 'validation']);
  });

  it('rule 2: a start before the buffer clamps to the oldest retained frame', async () => {
    const { buf, clock } = await bufferWith(50, 10, 2000); // oldest retained at now: 30
    expect(indices(resolveVideo(vid('start_offset_ms=-10000'), buf, clock.now))).toEqual([39, 49]);
    expect(indices(resolveVideo(vid('start_frame_index=0&max_fps=2'), buf, clock.now))).toEqual([34, 39, 44, 49]);
    // a window wholly before the buffer clamps up to its oldest frame
    expect(indices(resolveVideo(vid('start_frame_index=0&end_frame_index=10'), buf, clock.now))).toEqual([30]);
  });

  it('a legacy 10 s clip right after the stream starts gets the seconds that exist', async () => {
    const { buf, clock } = await bufferWith(30); // 3 s of video
    expect(indices(resolveVideo(vid('start_offset_ms=-10000&max_fps=1'), buf, clock.now))).toEqual([9, 19, 29]);
  });

  // The sampler steps back from the window's end, so it reaches max_fps and keeps the newest
  // frames. Frame i carries test-pattern index i, so the indices are what a model sees.
  it.each([
    // [source fps, frames in buffer, max_fps, window ms, expected indices]
    [5, 50, 2, 3000, [36, 39, 41, 44, 46, 49]],
    [5, 50, 5, 3000, [35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49]],
    [30, 300, 1, 2000, [269, 299]],
    [10, 200, 0.5, 10000, [119, 139, 159, 179, 199]],
    [2, 10, 5, 2000, [6, 7, 8, 9]],
  ])(
    'a %s fps source (%s frames), max_fps=%s over %s ms: the newest frame is in, max_fps per second',
    async (srcFps, n, maxFps, windowMs, expected) => {
      const { buf, clock } = await bufferWith(n, srcFps);
      const frames = resolveVideo(vid(`start_offset_ms=-${windowMs}&max_fps=${maxFps}`), buf, clock.now);
      expect(indices(frames)).toEqual(expected);
      expect(frames.at(-1)!.index).toBe(n - 1);
      expect(frames.length).toBeLessThanOrEqual(Math.floor((windowMs / 1000) * maxFps) + 1);
      // At the source's own rate or below, the cap is reached: the rate is max_fps, not less.
      if (maxFps <= srcFps) expect(frames.length).toBeGreaterThanOrEqual(Math.floor((windowMs / 1000) * maxFps));
    },
  );

  it('a window between two frames yields the frame on screen; an end past now is now', async () => {
    const { buf, clock } = await bufferWith(5, 1); // frames at 0..4000 ms, now 4020 ms
    clock.now += 780; // last frame 800 ms old
    expect(indices(resolveVideo(vid('start_offset_ms=-300'), buf, clock.now))).toEqual([4]);
    expect(indices(resolveVideo(vid('start_offset_ms=-2500&end_offset_ms=5000'), buf, clock.now))).toEqual([3, 4]);
  });

  it('rule 3: a start in the future or an index past the last frame fails with frame_not_yet_produced', async () => {
    const { buf, clock } = await bufferWith(50);
    for (const q of [
      'start_offset_ms=60000',
      'start_timestamp_ms=60000',
      'start_frame_index=50',
      'start_frame_index=0&end_frame_index=51',
    ]) {
      const e = errorOf(() => resolveVideo(vid(q), buf, clock.now));
      expect([e.status, e.code, e.shape]).toEqual([422, 'frame_not_yet_produced', 'stream']);
    }
  });

  it('an end before the start is a validation error at the reference', async () => {
    const { buf, clock } = await bufferWith(50);
    for (const q of [
      'start_frame_index=30&end_frame_index=10',
      'start_offset_ms=-1000&end_offset_ms=-3000',
      'start_timestamp_ms=3000&end_frame_index=5',
      'start_frame_index=20&end_timestamp_ms=1900',
    ]) {
      const e = errorOf(() => resolveVideo(vid(q), buf, clock.now, LOC));
      expect([e.status, e.shape]).toEqual([422, 'validation']);
      expect(e.toBody()).toMatchObject({ error: 'validation_error', details: [{ loc: LOC }] });
    }
  });

  it('a window that ends where it starts is empty: the frame on screen at its end', async () => {
    const { buf, clock } = await bufferWith(50);
    expect(indices(resolveVideo(vid('start_frame_index=3&end_frame_index=3'), buf, clock.now, LOC))).toEqual([2]);
    expect(indices(resolveVideo(vid('start_timestamp_ms=2500&end_timestamp_ms=2500'), buf, clock.now, LOC))).toEqual([24]);
    expect(indices(resolveVideo(vid('start_timestamp_ms=0&end_timestamp_ms=0'), buf, clock.now, LOC))).toEqual([0]);
  });

  it('stays O(log n) per picked frame on a 4-minute buffer (frames examined, counted)', async () => {
    const n = 2400;
    const { buf, clock } = await bufferWith(n, 10);
    // Counts every read of a retained frame's stream time: a binary search reads O(log n) of them,
    // a scan of the buffer n. (How fast it is: `npm run bench emulator`.)
    let reads = 0;
    for (let i = buf.oldestFrame!.index; i <= buf.lastFrameIndex!; i++) {
      const f = buf.byIndex(i)!;
      const t = f.streamTimeMs;
      Object.defineProperty(f, 'streamTimeMs', { get: () => (reads++, t) });
    }
    const picked = resolveVideo(vid('start_offset_ms=-10000&max_fps=1'), buf, clock.now);
    expect(picked).toHaveLength(10);
    const searches = picked.length + 3; // one per pick, plus the window's ends
    expect(reads).toBeLessThanOrEqual(searches * (Math.ceil(Math.log2(n)) + 4));
  });
});

describe("the provider's dialect (emulator.dialect = provider)", () => {
  const provider = { dialect: 'provider' as const };

  it('future and evicted frames answer 409 and 410, with the same codes and stream shape', async () => {
    const { buf, clock } = await bufferWith(50, 10, 2000);
    buf.evict(clock.now);
    const notYet = errorOf(() => resolveImage(img('frame_index=50'), buf, clock.now, provider));
    expect([notYet.status, notYet.code, notYet.shape]).toEqual([409, 'frame_not_yet_produced', 'stream']);
    const evicted = errorOf(() => resolveImage(img('timestamp_ms=1000'), buf, clock.now, provider));
    expect([evicted.status, evicted.code, evicted.shape]).toEqual([410, 'frame_evicted', 'stream']);
    const start = errorOf(() => resolveVideo(vid('start_offset_ms=60000'), buf, clock.now, LOC, provider));
    expect([start.status, start.code]).toEqual([409, 'frame_not_yet_produced']);
  });

  it('negative offsets count back from the newest frame, not from now', async () => {
    const { buf, clock } = await bufferWith(5, 1); // frames at 0..4000 ms
    clock.now += 780; // now 4800 ms: the newest frame is 800 ms old
    expect(resolveImage(img('offset_ms=-1000&tolerance_ms=50'), buf, clock.now, provider).index).toBe(3);
    // the contract counts from now (3800 ms), where no frame lies within 50 ms
    const e = errorOf(() => resolveImage(img('offset_ms=-1000&tolerance_ms=50'), buf, clock.now));
    expect([e.status, e.code]).toEqual([422, 'frame_not_yet_produced']);
  });

  it('an empty window is 404 segment_empty; an end at or before the start is 400 segment_invalid', async () => {
    const { buf, clock } = await bufferWith(5, 1); // frames at 0..4000 ms, now 4020 ms
    clock.now += 780;
    const empty = errorOf(() => resolveVideo(vid('start_timestamp_ms=4200'), buf, clock.now, LOC, provider));
    expect([empty.status, empty.code, empty.shape]).toEqual([404, 'segment_empty', 'stream']);
    const invalid = errorOf(() => resolveVideo(vid('start_frame_index=3&end_frame_index=3'), buf, clock.now, LOC, provider));
    expect([invalid.status, invalid.code, invalid.shape]).toEqual([400, 'segment_invalid', 'stream']);
    expect(indices(resolveVideo(vid('start_offset_ms=-2500'), buf, clock.now, LOC, provider))).toEqual([2, 3, 4]);
  });
});

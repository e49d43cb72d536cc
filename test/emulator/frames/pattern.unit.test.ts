import sharp from 'sharp';
import { ServiceError } from '../../../src/lib/errors';
import { prng } from '../../helpers/prng';
import { i420ToRgb } from '../../../src/emulator/frames/codec';
import {
  PATTERN_INDEX_MODULUS,
  PatternRenderer,
  barGeometry,
  decodePattern,
  indexFromBits,
  patternBits,
  renderPatternRgb,
} from '../../../src/emulator/frames/pattern';
import type { Pixels } from '../../../src/emulator/frames/types';

interface Step {
  /** Resize to this width (height keeps the aspect). */
  width?: number;
  blur?: number;
  quality?: number;
}

/** Pushes a raw RGB image through a chain of sharp steps (resize, blur, JPEG) and back to RGB. */
async function degrade(px: Pixels, steps: Step[]): Promise<Pixels> {
  let cur = px;
  for (const s of steps) {
    let img = sharp(cur.data, { raw: { width: cur.width, height: cur.height, channels: 3 } });
    if (s.width) img = img.resize({ width: s.width, height: Math.round((cur.height * s.width) / cur.width), fit: 'fill' });
    if (s.blur) img = img.blur(s.blur);
    if (s.quality) img = sharp(await img.jpeg({ quality: s.quality }).toBuffer());
    const { data, info } = await img.removeAlpha().raw().toBuffer({ resolveWithObject: true });
    cur = { width: info.width, height: info.height, data };
  }
  return cur;
}

const pattern = (index: number, width: number, height: number): Pixels => ({
  width,
  height,
  data: renderPatternRgb(index, width, height),
});

const INDICES = [0, 1, 2, 255, 256, 12345, 65535, 100000, 999999, 7777777, PATTERN_INDEX_MODULUS - 1];

describe('pattern bits', () => {
  it('round-trips every bit of the index range edges and a sample in between', () => {
    const rand = prng(1);
    const sample = [...INDICES, ...Array.from({ length: 2000 }, () => Math.floor(rand() * PATTERN_INDEX_MODULUS))];
    for (const i of sample) expect(indexFromBits(patternBits(i))).toBe(i);
  });

  it('paints indices modulo 2^24', () => {
    expect(indexFromBits(patternBits(PATTERN_INDEX_MODULUS + 5))).toBe(5);
  });

  it('rejects trivial bit strings (all 0, all 1, alternating, row-constant)', () => {
    const mk = (f: (i: number) => number) => Array.from({ length: 40 }, (_, i) => f(i));
    const strings = [mk(() => 0), mk(() => 1), mk((i) => i % 2), mk((i) => 1 - (i % 2))];
    for (let rows = 0; rows < 32; rows++) strings.push(mk((i) => (rows >> Math.floor(i / 8)) & 1));
    for (const s of strings) expect(indexFromBits(s)).toBeNull();
  });

  it('detects every single-bit error', () => {
    for (const i of [0, 12345, PATTERN_INDEX_MODULUS - 1]) {
      const bits = patternBits(i);
      for (let b = 0; b < bits.length; b++) {
        const flipped = Uint8Array.from(bits);
        flipped[b] ^= 1;
        expect(indexFromBits(flipped)).toBeNull();
      }
    }
  });
});

describe('renderPatternRgb / PatternRenderer', () => {
  it('renders packed RGB of the requested size, down to 64x48 and odd sizes', () => {
    for (const [w, h] of [
      [64, 48],
      [320, 240],
      [333, 251],
      [640, 480],
    ] as const) {
      const buf = renderPatternRgb(42, w, h);
      expect(buf.length).toBe(w * h * 3);
      expect(decodePattern({ width: w, height: h, data: buf })).toBe(42);
    }
  });

  it('rejects bad sizes, indices and colours with validation ServiceErrors', () => {
    for (const [w, h] of [
      [0, 0],
      [15, 12],
      [64.5, 48],
      [Number.NaN, 48],
      [100000, 48],
    ]) {
      expect(() => renderPatternRgb(1, w!, h!)).toThrow(ServiceError);
    }
    for (const bad of [-1, 1.5, Number.NaN, Infinity]) expect(() => renderPatternRgb(bad, 64, 48)).toThrow(ServiceError);
    expect(() => new PatternRenderer(64, 48, { background: [300, 0, 0] })).toThrow(ServiceError);
  });

  it('returns a fresh buffer per frame (a sink may keep it)', () => {
    const r = new PatternRenderer(160, 120);
    const a = r.renderRgb(1);
    const copy = Buffer.from(a);
    r.renderRgb(2);
    expect(a.equals(copy)).toBe(true);
  });

  it('moves the bar as the index grows, back and forth, inside the frame', () => {
    const xs = Array.from({ length: 61 }, (_, i) => barGeometry(i, 320).x);
    expect(new Set(xs).size).toBeGreaterThan(25);
    expect(Math.min(...xs)).toBe(0);
    expect(Math.max(...xs) + barGeometry(0, 320).w).toBe(320);
    expect(xs[0]).toBe(xs[60]); // one full sweep there and back
    // The lower area (below the code band) differs between consecutive frames.
    const r = new PatternRenderer(320, 240);
    const lower = (b: Buffer) => b.subarray(Math.floor((5 * 240) / 12) * 320 * 3);
    expect(lower(r.renderRgb(10)).equals(lower(r.renderRgb(11)))).toBe(false);
  });

  it('uses the requested colours', () => {
    const buf = renderPatternRgb(0, 320, 240, { background: [0, 200, 0], bar: [255, 0, 0] });
    const at = (x: number, y: number) => [...buf.subarray((y * 320 + x) * 3, (y * 320 + x) * 3 + 3)];
    expect(at(300, 230)).toEqual([0, 200, 0]); // background, bar is at x 0..19 for index 0
    expect(at(5, 230)).toEqual([255, 0, 0]);
  });

  it('renders I420 natively, matching the RGB rendering after conversion', () => {
    for (const [w, h, tolerance] of [
      [320, 240, 0.005],
      [65, 49, 0.03], // odd sizes: chroma shared across the bar's and the band's edges
    ] as const) {
      const r = new PatternRenderer(w, h);
      for (const i of [0, 17, 12345]) {
        const yuv = r.renderI420(i);
        expect(yuv.length).toBe(w * h + 2 * Math.ceil(w / 2) * Math.ceil(h / 2));
        const rgb = i420ToRgb(w, h, yuv);
        expect(decodePattern({ width: w, height: h, data: rgb })).toBe(i);
        // Same picture: colours within a few levels away from the bar's chroma edges.
        const ref = r.renderRgb(i);
        let off = 0;
        for (let p = 0; p < ref.length; p++) if (Math.abs(ref[p]! - rgb[p]!) > 6) off++;
        expect(off / ref.length).toBeLessThan(tolerance);
      }
    }
  });
});

describe('decodePattern through compression and scaling', () => {
  it('survives JPEG at qualities 95 down to 40 at several sizes', async () => {
    for (const [w, h] of [
      [640, 480],
      [320, 240],
      [160, 120],
      [1280, 720],
    ] as const) {
      for (const q of [95, 75, 60, 40]) {
        for (const i of [0, 12345, PATTERN_INDEX_MODULUS - 1]) {
          expect(await decodePattern(await degrade(pattern(i, w, h), [{ quality: q }]))).toBe(i);
        }
      }
    }
  });

  it('survives 640x480 stored at 320 wide (q40-75) and decoded at 160x120', async () => {
    for (const q of [75, 40]) {
      for (const i of INDICES) {
        const stored = await degrade(pattern(i, 640, 480), [{ width: 320, quality: q }]);
        expect(stored.width).toBe(320);
        expect(decodePattern(stored)).toBe(i);
        expect(decodePattern(await degrade(stored, [{ width: 160 }]))).toBe(i);
      }
    }
  });

  it('survives the documented minimum size, 64x48, with blur and JPEG q20', async () => {
    for (const i of INDICES) {
      expect(decodePattern(await degrade(pattern(i, 64, 48), [{ blur: 1, quality: 20 }]))).toBe(i);
      expect(decodePattern(await degrade(pattern(i, 640, 480), [{ width: 64, quality: 40 }]))).toBe(i);
    }
  });

  it('survives a VP8-like degradation: downscale, blur, heavy JPEG (q20-30), re-store, small decode', async () => {
    for (const i of INDICES) {
      // Transport at half size with codec blur and blocking, then the buffer's own JPEG, then a small decode.
      const transported = await degrade(pattern(i, 640, 480), [{ width: 320, blur: 1.5, quality: 25 }]);
      const stored = await degrade(transported, [{ quality: 75 }]);
      expect(decodePattern(stored)).toBe(i);
      expect(decodePattern(await degrade(stored, [{ width: 160 }]))).toBe(i);
      // Harsher: 320x240 source, blur σ4, q20; and 160x120 at q20 with blur.
      expect(decodePattern(await degrade(pattern(i, 320, 240), [{ blur: 4, quality: 20 }]))).toBe(i);
      expect(decodePattern(await degrade(pattern(i, 160, 120), [{ blur: 1.5, quality: 20 }]))).toBe(i);
    }
  });

  it('survives colour and brightness shifts (comparison between neighbouring cells, not a threshold)', () => {
    const px = pattern(4242, 320, 240);
    const dim = Buffer.from(px.data.map((v) => 60 + Math.round(v * 0.4))); // contrast 255 -> 102, lifted blacks
    expect(decodePattern({ ...px, data: dim })).toBe(4242);
  });
});

describe('decodePattern false-positive resistance', () => {
  const W = 320;
  const H = 240;
  const image = (f: (x: number, y: number) => [number, number, number], w = W, h = H): Pixels => {
    const data = Buffer.alloc(w * h * 3);
    for (let y = 0, o = 0; y < h; y++)
      for (let x = 0; x < w; x++, o += 3) {
        const [r, g, b] = f(x, y);
        data[o] = r;
        data[o + 1] = g;
        data[o + 2] = b;
      }
    return { width: w, height: h, data };
  };

  it('returns null for flat colours', () => {
    for (const c of [
      [0, 0, 0],
      [255, 255, 255],
      [128, 128, 128],
      [255, 0, 0],
      [30, 80, 200],
    ] as const) {
      expect(decodePattern(image(() => [c[0], c[1], c[2]]))).toBeNull();
    }
  });

  it('returns null for gradients (horizontal, vertical, diagonal, radial, steep)', () => {
    const g = (v: number) => Math.max(0, Math.min(255, Math.round(v)));
    const fns: ((x: number, y: number) => [number, number, number])[] = [
      (x) => [g((x / W) * 255), g((x / W) * 255), g((x / W) * 255)],
      (_x, y) => [g((y / H) * 255), 0, g(255 - (y / H) * 255)],
      (x, y) => [g(((x + y) / (W + H)) * 255), 100, 50],
      (x, y) => {
        const v = g(255 - Math.hypot(x - W / 2, y - H / 2));
        return [v, v, v];
      },
      (x) => [g((((x * 16) % W) * (255 / (W / 16 - 1))) / 16), 0, 0], // a saw per cell width
    ];
    for (const f of fns) expect(decodePattern(image(f))).toBeNull();
  });

  it('returns null for random pixels and random noise from sharp', async () => {
    const rand = prng(7);
    for (let k = 0; k < 5; k++) {
      const data = Buffer.alloc(W * H * 3);
      for (let i = 0; i < data.length; i++) data[i] = Math.floor(rand() * 256);
      expect(decodePattern({ width: W, height: H, data })).toBeNull();
    }
    const { data, info } = await sharp({
      create: { width: W, height: H, channels: 3, background: '#000', noise: { type: 'gaussian', mean: 128, sigma: 60 } },
    })
      .raw()
      .toBuffer({ resolveWithObject: true });
    expect(decodePattern({ width: info.width, height: info.height, data })).toBeNull();
  });

  it('returns null for cell-sized checkerboards, stripes and random black/white cells', () => {
    const cell = (x: number, y: number) => [Math.floor((x * 16) / W), Math.floor((y * 12) / H)] as const;
    const bw = (on: boolean): [number, number, number] => (on ? [255, 255, 255] : [0, 0, 0]);
    expect(decodePattern(image((x, y) => bw((cell(x, y)[0] + cell(x, y)[1]) % 2 === 0)))).toBeNull();
    expect(decodePattern(image((x, y) => bw((cell(x, y)[0] + cell(x, y)[1]) % 2 === 1)))).toBeNull();
    expect(decodePattern(image((x) => bw(cell(x, 0)[0] % 2 === 0)))).toBeNull();
    expect(decodePattern(image((x) => bw(cell(x, 0)[0] % 2 === 1)))).toBeNull();
    const rand = prng(11);
    let hits = 0;
    const data = Buffer.alloc(64 * 48 * 3);
    for (let k = 0; k < 1000; k++) {
      // Random black/white 4x4 cells on the pattern's own grid.
      for (let c = 0; c < 16 * 12; c++) {
        const v = rand() < 0.5 ? 255 : 0;
        const [cx, cy] = [c % 16, Math.floor(c / 16)];
        for (let y = cy * 4; y < cy * 4 + 4; y++) data.fill(v, (y * 64 + cx * 4) * 3, (y * 64 + cx * 4 + 4) * 3);
      }
      if (decodePattern({ width: 64, height: 48, data }) !== null) hits++;
    }
    expect(hits).toBe(0);
  });

  it('rejects valid-looking code bands with random bits (CRC), and mirrored or flipped patterns', () => {
    const rand = prng(3);
    let hits = 0;
    const r = new PatternRenderer(64, 48);
    for (let k = 0; k < 2000; k++) {
      // A genuine pattern whose code cells are re-painted with random Manchester bits.
      const buf = r.renderRgb(0);
      for (let bit = 0; bit < 40; bit++) {
        const v = rand() < 0.5;
        const row = Math.floor(bit / 8);
        const pair = bit % 8;
        for (let y = row * 4; y < row * 4 + 4; y++) {
          buf.fill(v ? 255 : 0, (y * 64 + pair * 8) * 3, (y * 64 + pair * 8 + 4) * 3);
          buf.fill(v ? 0 : 255, (y * 64 + pair * 8 + 4) * 3, (y * 64 + pair * 8 + 8) * 3);
        }
      }
      if (decodePattern({ width: 64, height: 48, data: buf }) !== null) hits++;
    }
    expect(hits).toBeLessThanOrEqual(1); // 2000 / 65536 expected: 0.03

    for (const i of [1, 12345, 999999]) {
      const px = pattern(i, 320, 240);
      const mirrored = Buffer.alloc(px.data.length);
      const flipped = Buffer.alloc(px.data.length);
      for (let y = 0; y < 240; y++)
        for (let x = 0; x < 320; x++) {
          px.data.copy(mirrored, (y * 320 + (319 - x)) * 3, (y * 320 + x) * 3, (y * 320 + x) * 3 + 3);
          px.data.copy(flipped, ((239 - y) * 320 + x) * 3, (y * 320 + x) * 3, (y * 320 + x) * 3 + 3);
        }
      expect(decodePattern({ ...px, data: mirrored })).toBeNull();
      expect(decodePattern({ ...px, data: flipped })).toBeNull();
    }
  });

  it('returns null for a real-ish photo (shapes, gradients, noise, blur) made with sharp, at several sizes', async () => {
    const svg = Buffer.from(`<svg xmlns="http://www.w3.org/2000/svg" width="640" height="480">
      <defs><linearGradient id="sky" x1="0" y1="0" x2="0" y2="1">
        <stop offset="0" stop-color="#6aa9e9"/><stop offset="1" stop-color="#dfeefa"/></linearGradient></defs>
      <rect width="640" height="480" fill="url(#sky)"/>
      <circle cx="500" cy="90" r="50" fill="#ffe27a"/>
      <rect y="300" width="640" height="180" fill="#4f7d3a"/>
      <polygon points="60,300 140,150 220,300" fill="#2f4f2f"/>
      <polygon points="180,300 260,120 340,300" fill="#355e3b"/>
      <rect x="400" y="220" width="140" height="110" fill="#a0522d"/>
      <rect x="430" y="250" width="30" height="30" fill="#222"/><rect x="480" y="250" width="30" height="30" fill="#eee"/>
      <text x="40" y="60" font-size="40" fill="#111">HELLO 1234</text></svg>`);
    const photo = await sharp(svg).blur(0.8).jpeg({ quality: 70 }).toBuffer();
    const noisy = await sharp(photo)
      .composite([
        {
          input: await sharp({
            create: { width: 640, height: 480, channels: 3, background: '#000', noise: { type: 'gaussian', mean: 128, sigma: 20 } },
          })
            .png()
            .toBuffer(),
          blend: 'overlay',
        },
      ])
      .jpeg({ quality: 60 })
      .toBuffer();
    for (const jpeg of [photo, noisy]) {
      for (const width of [640, 320, 160]) {
        const { data, info } = await sharp(jpeg).resize({ width }).removeAlpha().raw().toBuffer({ resolveWithObject: true });
        expect(decodePattern({ width: info.width, height: info.height, data })).toBeNull();
      }
    }
  });

  it('returns null (no throw) for degenerate input', () => {
    expect(decodePattern({ width: 0, height: 0, data: Buffer.alloc(0) })).toBeNull();
    expect(decodePattern({ width: 320, height: 240, data: Buffer.alloc(10) })).toBeNull();
    expect(decodePattern({ width: 10, height: 10, data: Buffer.alloc(300) })).toBeNull();
  });
});

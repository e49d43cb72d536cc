import sharp from 'sharp';
import { ServiceError } from '../../../src/lib/errors';
import { decimateI420, decodeJpeg, encodeFrame, i420ToRgb, rawToRgb, rgbToI420, storedSize } from '../../../src/emulator/frames/codec';
import { PatternRenderer, decodePattern, renderPatternRgb } from '../../../src/emulator/frames/pattern';
import type { RawFrame } from '../../../src/emulator/frames/types';

const isJpeg = (b: Buffer) => b[0] === 0xff && b[1] === 0xd8 && b[b.length - 2] === 0xff && b[b.length - 1] === 0xd9;

function toRgba(rgb: Buffer): Buffer {
  const out = Buffer.alloc((rgb.length / 3) * 4, 7); // alpha 7: must not leak into the picture
  for (let i = 0, o = 0; i < rgb.length; i += 3, o += 4) rgb.copy(out, o, i, i + 3);
  return out;
}

/** A colourful test image: hue sweep across, brightness down. */
function colourful(w: number, h: number): Buffer {
  const out = Buffer.alloc(w * h * 3);
  for (let y = 0; y < h; y++)
    for (let x = 0; x < w; x++) {
      const o = (y * w + x) * 3;
      out[o] = Math.round((x / w) * 255);
      out[o + 1] = Math.round((y / h) * 255);
      out[o + 2] = Math.round(((x + y) / (w + h)) * 255);
    }
  return out;
}

describe('storedSize', () => {
  it('downscales to the store width keeping aspect, never upscales', () => {
    expect(storedSize(640, 480, 320)).toEqual({ width: 320, height: 240 });
    expect(storedSize(1280, 720, 320)).toEqual({ width: 320, height: 180 });
    expect(storedSize(160, 120, 320)).toEqual({ width: 160, height: 120 });
    expect(storedSize(321, 241, 320)).toEqual({ width: 320, height: 240 });
  });
});

describe('I420 conversion (BT.601 limited range)', () => {
  it('maps video black, white and primaries', () => {
    const frame = (y: number, u: number, v: number) => i420ToRgb(2, 2, Buffer.from([y, y, y, y, u, v]));
    expect([...frame(16, 128, 128).subarray(0, 3)]).toEqual([0, 0, 0]);
    expect([...frame(235, 128, 128).subarray(0, 3)]).toEqual([255, 255, 255]);
    const red = [...frame(81, 90, 240).subarray(0, 3)]; // BT.601 red
    expect(red[0]).toBeGreaterThan(250);
    expect(red[1]).toBeLessThan(5);
    expect(red[2]).toBeLessThan(5);
  });

  it('round-trips RGB through I420 within chroma-subsampling error, odd sizes included', () => {
    for (const [w, h] of [
      [64, 48],
      [33, 17],
    ] as const) {
      const rgb = colourful(w, h);
      const yuv = rgbToI420(w, h, rgb);
      expect(yuv.length).toBe(w * h + 2 * Math.ceil(w / 2) * Math.ceil(h / 2));
      const back = i420ToRgb(w, h, yuv);
      let err = 0;
      for (let i = 0; i < rgb.length; i++) err += Math.abs(rgb[i]! - back[i]!);
      expect(err / rgb.length).toBeLessThan(4);
    }
  });
});

describe('rawToRgb', () => {
  const rgb = renderPatternRgb(9, 64, 48);

  it('passes RGB through, strips alpha, converts I420', () => {
    expect(rawToRgb({ width: 64, height: 48, format: 'rgb', data: rgb }).data.equals(rgb)).toBe(true);
    expect(rawToRgb({ width: 64, height: 48, format: 'rgba', data: toRgba(rgb) }).data.equals(rgb)).toBe(true);
    const fromI420 = rawToRgb({ width: 64, height: 48, format: 'i420', data: new PatternRenderer(64, 48).renderI420(9) });
    expect(fromI420.data.length).toBe(rgb.length);
    expect(decodePattern(fromI420)).toBe(9);
  });

  it('rejects inconsistent frames with validation ServiceErrors', () => {
    const bad: RawFrame[] = [
      { width: 64, height: 48, format: 'rgb', data: rgb.subarray(0, 100) },
      { width: 0, height: 48, format: 'rgb', data: rgb },
      { width: 64.5, height: 48, format: 'rgb', data: rgb },
      { width: 64, height: 48, format: 'bgr' as 'rgb', data: rgb },
      { width: 64, height: 48, format: 'i420', data: Buffer.alloc(64 * 48) },
    ];
    for (const f of bad) {
      expect(() => rawToRgb(f)).toThrow(ServiceError);
      try {
        rawToRgb(f);
      } catch (err) {
        expect((err as ServiceError).status).toBe(422);
      }
    }
  });
});

describe('encodeFrame / decodeJpeg', () => {
  it('stores 640x480 as a 320x240 JPEG whose pattern still decodes, from every raw format', async () => {
    const r = new PatternRenderer(640, 480);
    const rgb = r.renderRgb(123456);
    const frames: RawFrame[] = [
      { width: 640, height: 480, format: 'rgb', data: rgb },
      { width: 640, height: 480, format: 'rgba', data: toRgba(rgb) },
      { width: 640, height: 480, format: 'i420', data: r.renderI420(123456) },
    ];
    for (const raw of frames) {
      const jpeg = await encodeFrame(raw, { storeWidth: 320, quality: 75 });
      expect(isJpeg(jpeg)).toBe(true);
      const meta = await sharp(jpeg).metadata();
      expect([meta.width, meta.height, meta.format]).toEqual([320, 240, 'jpeg']);
      const px = await decodeJpeg(jpeg);
      expect([px.width, px.height, px.data.length]).toEqual([320, 240, 320 * 240 * 3]);
      expect(decodePattern(px)).toBe(123456);
    }
  });

  it('keeps aspect, never upscales, and honours quality', async () => {
    const wide = await encodeFrame(
      { width: 1280, height: 720, format: 'rgb', data: renderPatternRgb(1, 1280, 720) },
      { storeWidth: 320, quality: 75 },
    );
    expect(await sharp(wide).metadata()).toMatchObject({ width: 320, height: 180 });
    const small = await encodeFrame(
      { width: 160, height: 120, format: 'rgb', data: renderPatternRgb(1, 160, 120) },
      { storeWidth: 320, quality: 75 },
    );
    expect(await sharp(small).metadata()).toMatchObject({ width: 160, height: 120 });

    const photo = { width: 320, height: 240, format: 'rgb' as const, data: colourful(320, 240) };
    const lo = await encodeFrame(photo, { storeWidth: 320, quality: 30 });
    const hi = await encodeFrame(photo, { storeWidth: 320, quality: 95 });
    expect(lo.length).toBeLessThan(hi.length);
    // Out-of-range quality is clamped, not an error.
    expect(isJpeg(await encodeFrame(photo, { storeWidth: 320, quality: 500 }))).toBe(true);
  });

  it('accepts a plain Uint8Array longer than the frame (padding ignored)', async () => {
    const rgb = renderPatternRgb(77, 160, 120);
    const padded = new Uint8Array(rgb.length + 1000);
    padded.set(rgb);
    const jpeg = await encodeFrame({ width: 160, height: 120, format: 'rgb', data: padded }, { storeWidth: 320, quality: 75 });
    expect(decodePattern(await decodeJpeg(jpeg))).toBe(77);
  });

  it('rejects (never throws synchronously) on bad raw input', async () => {
    const p = encodeFrame({ width: 10, height: 10, format: 'rgb', data: Buffer.alloc(5) }, { storeWidth: 320, quality: 75 });
    await expect(p).rejects.toBeInstanceOf(ServiceError);
  });

  it('decodes greyscale JPEG and PNG to 3-channel RGB', async () => {
    const grey = await sharp({ create: { width: 20, height: 10, channels: 3, background: '#808080' } })
      .greyscale()
      .jpeg()
      .toBuffer();
    const g = await decodeJpeg(grey);
    expect([g.width, g.height, g.data.length]).toEqual([20, 10, 600]);
    const png = await sharp({ create: { width: 4, height: 4, channels: 4, background: { r: 255, g: 0, b: 0, alpha: 0.5 } } })
      .png()
      .toBuffer();
    const p = await decodeJpeg(png);
    expect(p.data.length).toBe(48);
  });

  it('rejects garbage with a 422 ServiceError', async () => {
    for (const junk of [Buffer.alloc(0), Buffer.from('not a jpeg'), Buffer.from([0xff, 0xd8, 0xff, 0xe0, 1, 2, 3])]) {
      const err = await decodeJpeg(junk).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ServiceError);
      expect((err as ServiceError).status).toBe(422);
    }
  });
});

describe('large I420 frames are decimated before conversion', () => {
  it('a 1280×720 pattern frame stored 320 wide keeps its index and colours', async () => {
    const r = new PatternRenderer(1280, 720);
    const raw: RawFrame = { width: 1280, height: 720, format: 'i420', data: r.renderI420(4242) };
    const jpeg = await encodeFrame(raw, { storeWidth: 320, quality: 70 });
    const px = await decodeJpeg(jpeg);
    expect([px.width, px.height]).toEqual([320, 180]);
    expect(decodePattern(px)).toBe(4242);
    // Same picture as the full conversion path, up to sampling noise.
    const full = await decodeJpeg(
      await encodeFrame({ width: 1280, height: 720, format: 'rgb', data: r.renderRgb(4242) }, { storeWidth: 320, quality: 70 }),
    );
    let diff = 0;
    for (let i = 0; i < px.data.length; i++) diff += Math.abs(px.data[i]! - full.data[i]!);
    expect(diff / px.data.length).toBeLessThan(12);
  });

  it('decimateI420 keeps every k-th sample of each plane', () => {
    const w = 8,
      h = 4;
    const src = new Uint8Array(w * h + 2 * 4 * 2);
    src.forEach((_, i) => (src[i] = i % 251));
    const out = decimateI420(w, h, src, 2);
    expect([out.width, out.height]).toEqual([4, 2]);
    expect(Array.from(out.data.subarray(0, 8))).toEqual([0, 2, 4, 6, 16, 18, 20, 22]);
    // U plane of the source starts at 32 (4×2 samples), V at 40; the output keeps (0,0) and (2,0).
    expect(Array.from(out.data.subarray(8, 10))).toEqual([32, 34]);
    expect(Array.from(out.data.subarray(10, 12))).toEqual([40, 42]);
  });
});

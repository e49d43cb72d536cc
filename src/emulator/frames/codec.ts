import sharp from 'sharp';
import { ServiceError, validationError } from '../../lib/errors';
import type { Pixels, RawFrame } from './types';

/**
 * Frame codec: raw publisher frames (RGB, RGBA, I420) to compact stored JPEG, and stored JPEG
 * back to RGB for the models. The heavy lifting runs in sharp (libvips, off the event loop);
 * only the I420 colour conversion runs in JS, in one tight integer loop.
 */

export interface EncodeOptions {
  /** Largest stored width; smaller frames are kept at their size (no upscaling). */
  storeWidth: number;
  /** JPEG quality 1-100. */
  quality: number;
  /**
   * Optimised Huffman tables (default true): ~45% smaller stored frames for ~0.7 ms more CPU per
   * 320x240 encode on the test VM. Turn off when CPU, not buffer memory, is the constraint.
   */
  optimiseCoding?: boolean;
}

const MAX_SIDE = 16384;

function bytesPerFrame(width: number, height: number, format: RawFrame['format']): number {
  switch (format) {
    case 'rgb':
      return width * height * 3;
    case 'rgba':
      return width * height * 4;
    case 'i420':
      return width * height + 2 * ((width + 1) >> 1) * ((height + 1) >> 1);
    default:
      return -1;
  }
}

/** Throws a validation ServiceError unless the frame's size, format and data length agree. */
export function checkRawFrame(raw: RawFrame): void {
  const { width, height, format } = raw;
  const sizeOk = Number.isInteger(width) && Number.isInteger(height) && width > 0 && height > 0;
  if (!sizeOk || width > MAX_SIDE || height > MAX_SIDE) {
    throw validationError('Frame size out of range', [
      { loc: ['width', 'height'], msg: `got ${String(width)}x${String(height)}`, type: 'value_error' },
    ]);
  }
  const expected = bytesPerFrame(width, height, format);
  if (expected < 0) {
    throw validationError('Unknown frame format', [{ loc: ['format'], msg: String(format), type: 'value_error' }]);
  }
  if (!(raw.data instanceof Uint8Array) || raw.data.length < expected) {
    throw validationError('Frame data shorter than its size and format need', [
      { loc: ['data'], msg: `need ${expected} bytes, got ${raw.data?.length ?? 0}`, type: 'value_error' },
    ]);
  }
}

/**
 * I420 (BT.601 limited range, the WebRTC default) to packed RGB. Integer fixed point
 * (coefficients × 256); each chroma sample's terms are computed once for its pixel pair, and a
 * Uint8ClampedArray view does the clamping.
 */
export function i420ToRgb(width: number, height: number, src: Uint8Array): Buffer {
  const cw = (width + 1) >> 1;
  const ch = (height + 1) >> 1;
  const uBase = width * height;
  const vBase = uBase + cw * ch;
  const buf = Buffer.allocUnsafe(width * height * 3);
  const out = new Uint8ClampedArray(buf.buffer, buf.byteOffset, buf.length);
  const even = width & ~1;
  for (let y = 0; y < height; y++) {
    const yRow = y * width;
    const cRow = (y >> 1) * cw;
    let o = yRow * 3;
    for (let x = 0; x < width; x += 2) {
      const ci = cRow + (x >> 1);
      const d = src[uBase + ci]! - 128;
      const e = src[vBase + ci]! - 128;
      const rt = 409 * e + 128;
      const gt = -100 * d - 208 * e + 128;
      const bt = 516 * d + 128;
      const c0 = 298 * (src[yRow + x]! - 16);
      out[o] = (c0 + rt) >> 8;
      out[o + 1] = (c0 + gt) >> 8;
      out[o + 2] = (c0 + bt) >> 8;
      if (x < even) {
        const c1 = 298 * (src[yRow + x + 1]! - 16);
        out[o + 3] = (c1 + rt) >> 8;
        out[o + 4] = (c1 + gt) >> 8;
        out[o + 5] = (c1 + bt) >> 8;
      }
      o += 6;
    }
  }
  return buf;
}

/** Packed RGB to I420 (BT.601 limited range); chroma is the mean of each 2 × 2 block. */
export function rgbToI420(width: number, height: number, rgb: Uint8Array): Buffer {
  const cw = (width + 1) >> 1;
  const ch = (height + 1) >> 1;
  const uBase = width * height;
  const vBase = uBase + cw * ch;
  const out = Buffer.allocUnsafe(uBase + 2 * cw * ch);
  for (let i = 0, p = 0; i < uBase; i++, p += 3) {
    out[i] = 16 + ((66 * rgb[p]! + 129 * rgb[p + 1]! + 25 * rgb[p + 2]! + 128) >> 8);
  }
  for (let cy = 0; cy < ch; cy++) {
    const y0 = cy * 2;
    const y1 = Math.min(y0 + 1, height - 1);
    for (let cx = 0; cx < cw; cx++) {
      const x0 = cx * 2;
      const x1 = Math.min(x0 + 1, width - 1);
      const a = (y0 * width + x0) * 3;
      const b = (y0 * width + x1) * 3;
      const c = (y1 * width + x0) * 3;
      const d = (y1 * width + x1) * 3;
      const r = (rgb[a]! + rgb[b]! + rgb[c]! + rgb[d]! + 2) >> 2;
      const g = (rgb[a + 1]! + rgb[b + 1]! + rgb[c + 1]! + rgb[d + 1]! + 2) >> 2;
      const bl = (rgb[a + 2]! + rgb[b + 2]! + rgb[c + 2]! + rgb[d + 2]! + 2) >> 2;
      out[uBase + cy * cw + cx] = 128 + ((-38 * r - 74 * g + 112 * bl + 128) >> 8);
      out[vBase + cy * cw + cx] = 128 + ((112 * r - 94 * g - 18 * bl + 128) >> 8);
    }
  }
  return out;
}

/** Any raw frame as packed RGB. Throws a validation ServiceError on inconsistent input. */
export function rawToRgb(raw: RawFrame): Pixels {
  checkRawFrame(raw);
  const { width, height } = raw;
  const n = width * height;
  switch (raw.format) {
    case 'rgb':
      return { width, height, data: Buffer.from(raw.data.buffer, raw.data.byteOffset, n * 3) };
    case 'rgba': {
      const out = Buffer.allocUnsafe(n * 3);
      const src = raw.data;
      for (let i = 0, s = 0, o = 0; i < n; i++, s += 4, o += 3) {
        out[o] = src[s]!;
        out[o + 1] = src[s + 1]!;
        out[o + 2] = src[s + 2]!;
      }
      return { width, height, data: out };
    }
    default:
      return { width, height, data: i420ToRgb(width, height, raw.data) };
  }
}

/** The stored size of a frame: at most storeWidth wide, aspect kept, never upscaled. */
export function storedSize(width: number, height: number, storeWidth: number): { width: number; height: number } {
  if (!(storeWidth >= 1) || width <= storeWidth) return { width, height };
  const w = Math.floor(storeWidth);
  return { width: w, height: Math.max(1, Math.round((height * w) / width)) };
}

/**
 * Keeps every k-th pixel of an I420 frame (k ≥ 2), still I420. Converting a 1280×720 frame to RGB
 * only to shrink it to 320 wide costs ~16× the work; sharp's resize smooths what this leaves.
 */
export function decimateI420(width: number, height: number, src: Uint8Array, k: number): RawFrame {
  const w = Math.floor(width / k);
  const h = Math.floor(height / k);
  const cw = (w + 1) >> 1;
  const ch = (h + 1) >> 1;
  const scw = (width + 1) >> 1;
  const sch = (height + 1) >> 1;
  const out = new Uint8Array(w * h + 2 * cw * ch);
  for (let y = 0; y < h; y++) {
    const row = y * k * width;
    const o = y * w;
    for (let x = 0; x < w; x++) out[o + x] = src[row + x * k]!;
  }
  const su = width * height;
  const sv = su + scw * sch;
  const du = w * h;
  const dv = du + cw * ch;
  for (let y = 0; y < ch; y++) {
    const sy = Math.min(sch - 1, y * k) * scw;
    for (let x = 0; x < cw; x++) {
      const sx = Math.min(scw - 1, x * k);
      out[du + y * cw + x] = src[su + sy + sx]!;
      out[dv + y * cw + x] = src[sv + sy + sx]!;
    }
  }
  return { width: w, height: h, format: 'i420', data: out };
}

/** Raw frame → downscaled JPEG. Rejects (ServiceError) on inconsistent input; never throws synchronously. */
export async function encodeFrame(raw: RawFrame, opts: EncodeOptions): Promise<Buffer> {
  checkRawFrame(raw);
  const quality = Math.min(100, Math.max(1, Math.round(opts.quality)));
  const k = raw.format === 'i420' ? Math.floor(raw.width / Math.max(1, opts.storeWidth)) : 1;
  if (k >= 2) raw = decimateI420(raw.width, raw.height, raw.data, k);
  const { width, height } = raw;
  let channels: 3 | 4 = 3;
  let data: Uint8Array;
  if (raw.format === 'i420') {
    data = i420ToRgb(width, height, raw.data);
  } else {
    if (raw.format === 'rgba') channels = 4;
    data = raw.data.subarray(0, width * height * channels); // a longer (padded) buffer must not confuse sharp
  }
  let img = sharp(data, { raw: { width, height, channels } });
  if (channels === 4) img = img.removeAlpha();
  const target = storedSize(width, height, opts.storeWidth);
  if (target.width !== width) {
    img = img.resize({ width: target.width, height: target.height, fit: 'fill' });
  }
  return img.jpeg({ quality, optimiseCoding: opts.optimiseCoding ?? true }).toBuffer();
}

/** Stored JPEG (or any image sharp reads) → packed RGB. Rejects with a 422 ServiceError if undecodable. */
export async function decodeJpeg(jpeg: Buffer): Promise<Pixels> {
  try {
    const { data, info } = await sharp(jpeg).toColourspace('srgb').removeAlpha().raw().toBuffer({ resolveWithObject: true });
    if (info.channels !== 3) throw new Error(`decoded ${info.channels} channels`);
    return { width: info.width, height: info.height, data };
  } catch (err) {
    throw new ServiceError(422, 'invalid_image', 'Frame could not be decoded as an image', { cause: err });
  }
}

import { validationError } from '../../lib/errors';
import type { Pixels } from './types';

/**
 * The emulator's test pattern: a frame whose pixels carry an integer index that survives JPEG,
 * downscaling and video compression, over a coloured background with a moving bar.
 *
 * Layout, on a 16 × 12 grid of cells stretched to the frame (square cells at 4:3):
 *
 *   rows 0-4   the code band: 40 bits, each a horizontal pair of black/white cells
 *              (white|black = 1, black|white = 0). 24 bits carry the index (whitened),
 *              16 bits a CRC-16 of them.
 *   rows 5-11  a flat coloured background (blue by default) with a vertical bar (amber)
 *              that sweeps back and forth as the index grows, so consecutive frames differ.
 *
 * Why it survives: the code is pure luma (black/white, neutral chroma, so 4:2:0 chroma and
 * colour shifts do not matter), cells are large (1/16 of the width), and each bit compares two
 * neighbouring cells rather than a fixed threshold, so blur, contrast loss and brightness drift
 * cancel out. The decoder samples a few pixels around each cell centre only (720 reads a frame).
 *
 * Why ordinary images decode to null: all 40 pairs must split into two luma clusters separated by
 * a clear gap (every pair's darker cell darker than every pair's brighter cell by MIN_GAP), and
 * the 16-bit CRC must match. Noise, gradients, flat colours and photos fail the first test almost
 * always; the CRC catches the rest (and rejects the all-0, all-1 and striped bit strings).
 *
 * Indices are painted modulo 2^24 (PATTERN_INDEX_MODULUS); decode returns 0 … 2^24 - 1.
 * Rendering accepts any size from 16 × 12 (one pixel a cell) to 8192 × 8192. Minimum decodable
 * size (documented, tested): 64 × 48 (4 px cells), which survives blur σ1 + JPEG q20; larger
 * frames survive far more (320 × 240 with blur σ4-8 + JPEG q20, or q1 alone; 640 × 480 stored at
 * 320 and decoded at 160 × 120). Uncompressed or mildly compressed copies decode down to 32 × 24.
 */

export const PATTERN_INDEX_MODULUS = 2 ** 24;
export const PATTERN_MIN_RENDER_WIDTH = 16;
export const PATTERN_MIN_RENDER_HEIGHT = 12;
/** Smallest decoded image the code is documented to survive in (cells of 4 × 4 px). */
export const PATTERN_MIN_DECODE_WIDTH = 64;
export const PATTERN_MIN_DECODE_HEIGHT = 48;
const MAX_SIDE = 8192;

export type Rgb = readonly [number, number, number];

export interface PatternStyle {
  /** Colour of the lower area (default blue #1e50c8). */
  background?: Rgb;
  /** Colour of the moving bar (default amber #ffbe00). */
  bar?: Rgb;
}

export const DEFAULT_PATTERN_BACKGROUND: Rgb = [0x1e, 0x50, 0xc8];
export const DEFAULT_PATTERN_BAR: Rgb = [0xff, 0xbe, 0x00];

const COLS = 16;
const ROWS = 12;
const CODE_ROWS = 5;
const PAIRS_PER_ROW = COLS / 2;
const DATA_BITS = 24;
const CRC_BITS = 16;
const TOTAL_BITS = DATA_BITS + CRC_BITS; // = CODE_ROWS * PAIRS_PER_ROW
/** XOR masks so index 0 is not a flat pattern and trivial bit strings never carry a valid CRC. */
const DATA_WHITENING = 0x5a3c96;
const CRC_XOR = 0x3a71;
/** Luma gap (0-255) required between the brightest "black" and the darkest "white" sample. */
const MIN_GAP = 40;
/** Half-period, in frames, of the bar's back-and-forth sweep. */
const BAR_SWEEP_FRAMES = 30;

/** CRC-16/CCITT (poly 0x1021, init 0xffff) over the three payload bytes. */
function crc16(payload: number): number {
  let crc = 0xffff;
  for (let shift = 16; shift >= 0; shift -= 8) {
    crc ^= ((payload >>> shift) & 0xff) << 8;
    for (let b = 0; b < 8; b++) {
      crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
    }
  }
  return crc;
}

/** The 40 code bits of an index, MSB first: 24 whitened payload bits then 16 check bits. */
export function patternBits(index: number): Uint8Array {
  const payload = (mod24(index) ^ DATA_WHITENING) >>> 0;
  const check = crc16(payload) ^ CRC_XOR;
  const bits = new Uint8Array(TOTAL_BITS);
  for (let i = 0; i < DATA_BITS; i++) bits[i] = (payload >>> (DATA_BITS - 1 - i)) & 1;
  for (let i = 0; i < CRC_BITS; i++) bits[DATA_BITS + i] = (check >>> (CRC_BITS - 1 - i)) & 1;
  return bits;
}

/** Inverse of patternBits; null when the check bits do not match. */
export function indexFromBits(bits: ArrayLike<number>): number | null {
  let payload = 0;
  for (let i = 0; i < DATA_BITS; i++) payload = (payload << 1) | (bits[i]! & 1);
  let check = 0;
  for (let i = 0; i < CRC_BITS; i++) check = (check << 1) | (bits[DATA_BITS + i]! & 1);
  if ((crc16(payload >>> 0) ^ CRC_XOR) !== check) return null;
  return ((payload ^ DATA_WHITENING) >>> 0) & (PATTERN_INDEX_MODULUS - 1);
}

function mod24(index: number): number {
  return ((index % PATTERN_INDEX_MODULUS) + PATTERN_INDEX_MODULUS) % PATTERN_INDEX_MODULUS;
}

function checkIndex(index: number): void {
  if (!Number.isSafeInteger(index) || index < 0) {
    throw validationError('Pattern index must be a non-negative integer', [
      { loc: ['index'], msg: `got ${String(index)}`, type: 'value_error' },
    ]);
  }
}

function checkSize(width: number, height: number): void {
  const ok = (v: number, min: number) => Number.isInteger(v) && v >= min && v <= MAX_SIDE;
  if (!ok(width, PATTERN_MIN_RENDER_WIDTH) || !ok(height, PATTERN_MIN_RENDER_HEIGHT)) {
    throw validationError('Pattern size out of range', [
      {
        loc: ['width', 'height'],
        msg: `need integers, ${PATTERN_MIN_RENDER_WIDTH}x${PATTERN_MIN_RENDER_HEIGHT} to ${MAX_SIDE}x${MAX_SIDE}; got ${width}x${height}`,
        type: 'value_error',
      },
    ]);
  }
}

/** Cell edges in pixels: edges[i] is where cell i starts, edges[n] = size. */
function cellEdges(size: number, n: number): Int32Array {
  const edges = new Int32Array(n + 1);
  for (let i = 0; i <= n; i++) edges[i] = Math.floor((i * size) / n);
  return edges;
}

/** Left edge (px) and width of the bar for an index: a triangle wave over the free width. */
export function barGeometry(index: number, width: number): { x: number; w: number } {
  const w = Math.max(1, Math.floor(width / COLS));
  const phase = mod24(index) % (2 * BAR_SWEEP_FRAMES);
  const t = phase <= BAR_SWEEP_FRAMES ? phase : 2 * BAR_SWEEP_FRAMES - phase;
  return { x: Math.round((t / BAR_SWEEP_FRAMES) * (width - w)), w };
}

function toYuv(c: Rgb): [number, number, number] {
  const [r, g, b] = c;
  // BT.601 limited range, the inverse of codec.ts's i420ToRgb.
  return [
    16 + ((66 * r + 129 * g + 25 * b + 128) >> 8),
    128 + ((-38 * r - 74 * g + 112 * b + 128) >> 8),
    128 + ((112 * r - 94 * g - 18 * b + 128) >> 8),
  ];
}

function checkColour(c: Rgb, name: string): Rgb {
  const valid = c.length === 3 && c.every((v) => Number.isInteger(v) && v >= 0 && v <= 255);
  if (!valid) {
    throw validationError('Pattern colour must be three integers 0-255', [{ loc: [name], msg: JSON.stringify(c), type: 'value_error' }]);
  }
  return c;
}

/**
 * Renders pattern frames of one size. The background (everything that does not change) is built
 * once; each frame is one memcpy of it plus row copies for the code band and the bar, so a
 * 320 × 240 frame costs tens of microseconds. Every call returns a fresh buffer (a sink may keep it).
 */
export class PatternRenderer {
  private readonly colEdges: Int32Array;
  private readonly rowEdges: Int32Array;
  private readonly codeBottom: number;
  private readonly background: Rgb;
  private readonly bar: Rgb;
  private rgbBackground: Buffer | undefined;
  private yuvBackground: Buffer | undefined;

  constructor(
    readonly width: number,
    readonly height: number,
    style: PatternStyle = {},
  ) {
    checkSize(width, height);
    this.background = checkColour(style.background ?? DEFAULT_PATTERN_BACKGROUND, 'background');
    this.bar = checkColour(style.bar ?? DEFAULT_PATTERN_BAR, 'bar');
    this.colEdges = cellEdges(width, COLS);
    this.rowEdges = cellEdges(height, ROWS);
    this.codeBottom = this.rowEdges[CODE_ROWS]!;
  }

  /** Packed RGB, width * height * 3 bytes. */
  renderRgb(index: number): Buffer {
    checkIndex(index);
    const { width, height, colEdges, rowEdges, codeBottom } = this;
    const stride = width * 3;
    const bg = (this.rgbBackground ??= this.buildRgbBackground());
    const out = Buffer.allocUnsafe(bg.length);
    bg.copy(out);

    const bits = patternBits(index);
    const line = Buffer.allocUnsafe(stride);
    for (let r = 0; r < CODE_ROWS; r++) {
      for (let p = 0; p < PAIRS_PER_ROW; p++) {
        const bit = bits[r * PAIRS_PER_ROW + p]!;
        const c = 2 * p;
        line.fill(bit ? 255 : 0, colEdges[c]! * 3, colEdges[c + 1]! * 3);
        line.fill(bit ? 0 : 255, colEdges[c + 1]! * 3, colEdges[c + 2]! * 3);
      }
      for (let y = rowEdges[r]!; y < rowEdges[r + 1]!; y++) line.copy(out, y * stride);
    }

    const { x, w } = barGeometry(index, width);
    const seg = Buffer.allocUnsafe(w * 3);
    for (let i = 0; i < w; i++) seg.set(this.bar, i * 3);
    for (let y = codeBottom; y < height; y++) seg.copy(out, y * stride + x * 3);
    return out;
  }

  /** Planar I420 (BT.601 limited range), chroma at half resolution rounded up. */
  renderI420(index: number): Buffer {
    checkIndex(index);
    const { width, height, colEdges, rowEdges, codeBottom } = this;
    const cw = (width + 1) >> 1;
    const ch = (height + 1) >> 1;
    const bg = (this.yuvBackground ??= this.buildI420Background());
    const out = Buffer.allocUnsafe(bg.length);
    bg.copy(out);

    const bits = patternBits(index);
    const line = Buffer.allocUnsafe(width);
    for (let r = 0; r < CODE_ROWS; r++) {
      for (let p = 0; p < PAIRS_PER_ROW; p++) {
        const bit = bits[r * PAIRS_PER_ROW + p]!;
        const c = 2 * p;
        line.fill(bit ? 235 : 16, colEdges[c]!, colEdges[c + 1]!);
        line.fill(bit ? 16 : 235, colEdges[c + 1]!, colEdges[c + 2]!);
      }
      for (let y = rowEdges[r]!; y < rowEdges[r + 1]!; y++) line.copy(out, y * width);
    }

    const { x, w } = barGeometry(index, width);
    const [by, bu, bv] = toYuv(this.bar);
    for (let y = codeBottom; y < height; y++) out.fill(by, y * width + x, y * width + x + w);
    const uBase = width * height;
    const vBase = uBase + cw * ch;
    const cx0 = x >> 1;
    const cx1 = (x + w + 1) >> 1;
    for (let cy = (codeBottom + 1) >> 1; cy < ch; cy++) {
      out.fill(bu, uBase + cy * cw + cx0, uBase + cy * cw + cx1);
      out.fill(bv, vBase + cy * cw + cx0, vBase + cy * cw + cx1);
    }
    return out;
  }

  private buildRgbBackground(): Buffer {
    const { width, height, codeBottom } = this;
    const buf = Buffer.alloc(width * height * 3);
    const px = Buffer.from(this.background);
    buf.fill(px, codeBottom * width * 3);
    return buf;
  }

  private buildI420Background(): Buffer {
    const { width, height, codeBottom } = this;
    const cw = (width + 1) >> 1;
    const ch = (height + 1) >> 1;
    const [y, u, v] = toYuv(this.background);
    const buf = Buffer.alloc(width * height + 2 * cw * ch, 128);
    buf.fill(16, 0, codeBottom * width);
    buf.fill(y, codeBottom * width, width * height);
    const uBase = width * height;
    const vBase = uBase + cw * ch;
    // A chroma row belongs to the lower area when its top luma row does.
    const cTop = (codeBottom + 1) >> 1;
    buf.fill(u, uBase + cTop * cw, uBase + ch * cw);
    buf.fill(v, vBase + cTop * cw, vBase + ch * cw);
    return buf;
  }
}

/** One pattern frame as packed RGB (width * height * 3 bytes). */
export function renderPatternRgb(index: number, width: number, height: number, style?: PatternStyle): Buffer {
  return new PatternRenderer(width, height, style).renderRgb(index);
}

/**
 * Reads the index out of a pattern frame, or null when the image is not one. Scale-independent
 * (works on any downscaled copy with the same layout); samples 9 pixels per code cell.
 */
export function decodePattern(px: Pixels): number | null {
  const { width, height, data } = px;
  if (!Number.isInteger(width) || !Number.isInteger(height)) return null;
  if (width < COLS || height < ROWS || data.length < width * height * 3) return null;
  const cellW = width / COLS;
  const cellH = height / ROWS;
  const dx = Math.round(cellW * 0.2);
  const dy = Math.round(cellH * 0.2);

  const luma = (cx: number, cy: number): number => {
    let sum = 0;
    for (let oy = -dy; oy <= dy; oy += dy || 1) {
      const row = (cy + oy) * width;
      for (let ox = -dx; ox <= dx; ox += dx || 1) {
        const i = (row + cx + ox) * 3;
        sum += 77 * data[i]! + 150 * data[i + 1]! + 29 * data[i + 2]!;
      }
    }
    const n = (dx ? 3 : 1) * (dy ? 3 : 1);
    return sum / (n * 256);
  };

  const bits = new Uint8Array(TOTAL_BITS);
  let maxDark = -Infinity;
  let minBright = Infinity;
  for (let r = 0; r < CODE_ROWS; r++) {
    const cy = Math.round((r + 0.5) * cellH - 0.5);
    for (let p = 0; p < PAIRS_PER_ROW; p++) {
      const left = luma(Math.round((2 * p + 0.5) * cellW - 0.5), cy);
      const right = luma(Math.round((2 * p + 1.5) * cellW - 0.5), cy);
      bits[r * PAIRS_PER_ROW + p] = left > right ? 1 : 0;
      const dark = Math.min(left, right);
      const bright = Math.max(left, right);
      if (dark > maxDark) maxDark = dark;
      if (bright < minBright) minBright = bright;
      // Early out: most non-pattern images fail on the first pairs.
      if (minBright - maxDark < MIN_GAP) return null;
    }
  }
  return indexFromBits(bits);
}

import { decodePattern } from '../frames/pattern';
import type { Pixels } from '../frames/types';

/**
 * What the analyzer measures in one decoded frame. Everything but the pattern comes from a fixed
 * 40 × 30 grid of point samples at normalised positions, so frames of different sizes compare
 * directly and a frame's stats stay small enough to cache (≈ 4 KB).
 */

export const COLOUR_NAMES = [
  'black',
  'grey',
  'white',
  'red',
  'orange',
  'brown',
  'yellow',
  'green',
  'cyan',
  'blue',
  'purple',
  'magenta',
  'pink',
] as const;
export type ColourName = (typeof COLOUR_NAMES)[number];

const GRID_W = 40;
const GRID_H = 30;
const SAMPLES = GRID_W * GRID_H;

export interface FrameStats {
  width: number;
  height: number;
  /** Decoded test-pattern index, or null. */
  pattern: number | null;
  /** Mean BT.601 luma, 0-255. */
  brightness: number;
  /** Per colour name: [count, sum R, sum G, sum B] at offset 4 * COLOUR_NAMES.indexOf(name). */
  colourBins: Float64Array;
  /** The sample grid, packed RGB (GRID_W * GRID_H * 3 bytes), for motion between frames. */
  grid: Uint8Array;
}

/** Names a colour by HSV: value picks black, saturation picks the greys, hue the rest. */
export function colourNameOf(r: number, g: number, b: number): ColourName {
  const max = Math.max(r, g, b);
  const min = Math.min(r, g, b);
  const chroma = max - min;
  if (max < 50) return 'black';
  if (chroma < 32 || chroma / max < 0.2) return max > 200 ? 'white' : 'grey';
  let hue: number;
  if (max === r) hue = (60 * (g - b)) / chroma;
  else if (max === g) hue = 120 + (60 * (b - r)) / chroma;
  else hue = 240 + (60 * (r - g)) / chroma;
  if (hue < 0) hue += 360;
  if (hue < 15 || hue >= 345) return 'red';
  if (hue < 42) return max < 150 ? 'brown' : 'orange';
  if (hue < 70) return 'yellow';
  if (hue < 160) return 'green';
  if (hue < 200) return 'cyan';
  if (hue < 255) return 'blue';
  if (hue < 290) return 'purple';
  if (hue < 330) return 'magenta';
  return 'pink';
}

const hex2 = (v: number): string => Math.round(v).toString(16).padStart(2, '0');
export const toHex = (r: number, g: number, b: number): string => `#${hex2(r)}${hex2(g)}${hex2(b)}`;

export function frameStats(px: Pixels): FrameStats {
  const { width, height, data } = px;
  const grid = new Uint8Array(SAMPLES * 3);
  const colourBins = new Float64Array(COLOUR_NAMES.length * 4);
  let lumaSum = 0;
  for (let gy = 0; gy < GRID_H; gy++) {
    const row = Math.min(height - 1, Math.floor(((gy + 0.5) * height) / GRID_H)) * width;
    for (let gx = 0; gx < GRID_W; gx++) {
      const i = (row + Math.min(width - 1, Math.floor(((gx + 0.5) * width) / GRID_W))) * 3;
      const r = data[i]!;
      const g = data[i + 1]!;
      const b = data[i + 2]!;
      const o = (gy * GRID_W + gx) * 3;
      grid[o] = r;
      grid[o + 1] = g;
      grid[o + 2] = b;
      lumaSum += 0.299 * r + 0.587 * g + 0.114 * b;
      const bin = COLOUR_NAMES.indexOf(colourNameOf(r, g, b)) * 4;
      colourBins[bin]! += 1;
      colourBins[bin + 1]! += r;
      colourBins[bin + 2]! += g;
      colourBins[bin + 3]! += b;
    }
  }
  return { width, height, pattern: decodePattern(px), brightness: lumaSum / SAMPLES, colourBins, grid };
}

/** Mean absolute difference per channel sample (0-255) between two frames' grids. */
export function meanAbsDiff(a: FrameStats, b: FrameStats): number {
  let sum = 0;
  for (let i = 0; i < a.grid.length; i++) sum += Math.abs(a.grid[i]! - b.grid[i]!);
  return sum / a.grid.length;
}

export interface DominantColour {
  name: ColourName;
  hex: string;
  /** Share of samples (0-1) in this colour. */
  share: number;
}

/** The most common colour name over several frames, with the mean RGB of its samples. */
export function dominantColour(stats: FrameStats[]): DominantColour | null {
  if (stats.length === 0) return null;
  const totals = new Float64Array(COLOUR_NAMES.length * 4);
  for (const s of stats) for (let i = 0; i < totals.length; i++) totals[i]! += s.colourBins[i]!;
  let best = 0;
  for (let c = 1; c < COLOUR_NAMES.length; c++) if (totals[c * 4]! > totals[best * 4]!) best = c;
  const n = totals[best * 4]!;
  return {
    name: COLOUR_NAMES[best]!,
    hex: toHex(totals[best * 4 + 1]! / n, totals[best * 4 + 2]! / n, totals[best * 4 + 3]! / n),
    share: n / (SAMPLES * stats.length),
  };
}

export type MotionWord = 'still' | 'slight' | 'moving';

/** Thresholds on the mean absolute difference: JPEG noise alone stays under 2, camera noise under 6. */
export function motionWord(mad: number): MotionWord {
  if (mad < 2) return 'still';
  if (mad < 6) return 'slight';
  return 'moving';
}

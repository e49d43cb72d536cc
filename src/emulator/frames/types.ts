/** A frame as it arrives from a publisher (synthetic source, media room). */
export interface RawFrame {
  width: number;
  height: number;
  /** `rgb`: 3 bytes a pixel; `rgba`: 4; `i420`: planar Y, U, V (U and V at half resolution). */
  format: 'rgb' | 'rgba' | 'i420';
  data: Uint8Array;
}

/** A frame as the buffer keeps it: compact JPEG plus its place on the three axes. */
export interface StoredFrame {
  /** Lifetime index; never resets, even after eviction. */
  index: number;
  /** Wall-clock capture time (Unix ms). */
  capturedAtMs: number;
  /** Stream-clock time: ms since the stream's first frame. */
  streamTimeMs: number;
  /** Size as published (before downscaling for storage). */
  width: number;
  height: number;
  /** Downscaled JPEG. */
  jpeg: Buffer;
}

/** Decoded pixels handed to models: packed RGB, 3 bytes a pixel. */
export interface Pixels {
  width: number;
  height: number;
  data: Buffer;
}

/**
 * `image_url` parts that are not stream references: a `data:` URL of a JPEG or PNG, decoded in the
 * request, or an http(s) URL fetched from a configured allowed host only (`emulator.imageFetch`),
 * bounded in bytes and time. Either becomes a frame like a stream's (downscaled JPEG), so the
 * built-in models answer from its pixels as they do from stream frames.
 *
 * Every failure is a 422 in the contract's validation shape at the url's `loc`, one `type` each:
 * `url_parsing` (a malformed data URL), `url_not_allowed` (a host not on the list; decided while
 * parsing, before anything is fetched), `url_fetch` (no answer, a redirect, a non-2xx status, a
 * timeout), `image_too_large` (over `maxBytes`), `image_type` (not a JPEG or PNG), `image_decode`.
 */
import { createHash } from 'node:crypto';
import sharp from 'sharp';
import type { ValidationDetail } from '../lib/errors';
import { validationError } from '../lib/errors';
import { storedSize } from './frames/codec';
import type { StoredFrame } from './frames/types';

export type ImageSource = { kind: 'data'; mime: string; bytes: Buffer } | { kind: 'url'; url: URL };

export interface ImageLimits {
  /** Lower-case host names or `host:port`. */
  allowedHosts: readonly string[];
  maxBytes: number;
  timeoutMs: number;
}

/** A decoded request image: a frame outside any stream, and the digest the prompt cache compares. */
export interface RequestImage {
  frame: StoredFrame;
  digest: string;
}

const DATA_RE = /^data:([^,;]*)((?:;[^,;]*)*),(.*)$/is;
const BASE64_RE = /^[A-Za-z0-9+/]*={0,2}$/;
const IMAGE_TYPES = new Set(['image/jpeg', 'image/jpg', 'image/png']);
/** Decoding bound: a small file must not expand to gigabytes of pixels. */
const MAX_INPUT_PIXELS = 50_000_000;

/** Whether an image_url is one this module takes (rather than a stream reference). */
export function isImageUrl(url: string): boolean {
  return /^(data:|https?:\/\/)/i.test(url);
}

/** Lower-case `host` and `hostname` of a URL, IPv6 in brackets, as allow-lists name them. */
export function hostMatches(url: URL, allowed: readonly string[]): boolean {
  const host = url.host.toLowerCase();
  const hostname = url.hostname.toLowerCase();
  return allowed.some((a) => a === host || a === hostname);
}

/**
 * Parses a data or http(s) image URL (no I/O). Problems are validation details at `loc`; an http(s)
 * host that is not allowed is one of them.
 */
export function parseImageUrl(
  raw: string,
  loc: string[],
  allowedHosts: readonly string[],
): { ok: true; value: ImageSource } | { ok: false; problems: ValidationDetail[] } {
  const fail = (msg: string, type: string) => ({ ok: false as const, problems: [{ loc, msg, type }] });
  if (/^data:/i.test(raw)) {
    const m = DATA_RE.exec(raw);
    if (!m) return fail('a data URL must look like data:image/png;base64,<data>', 'url_parsing');
    const mime = m[1]!.trim().toLowerCase();
    const params = m[2]!
      .toLowerCase()
      .split(';')
      .map((p) => p.trim());
    if (!IMAGE_TYPES.has(mime))
      return fail(`a data URL image must be image/jpeg or image/png, got ${JSON.stringify(mime || 'text/plain')}`, 'image_type');
    if (!params.includes('base64')) return fail('a data URL image must be base64-encoded (data:<type>;base64,<data>)', 'url_parsing');
    const data = m[3]!.replace(/\s+/g, '');
    if (!BASE64_RE.test(data) || data.length % 4 === 1) return fail('the data URL is not valid base64', 'url_parsing');
    const bytes = Buffer.from(data, 'base64');
    if (bytes.length === 0) return fail('the data URL holds no image', 'url_parsing');
    return { ok: true, value: { kind: 'data', mime, bytes } };
  }
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return fail('not a valid URL', 'url_parsing');
  }
  if (url.username || url.password) return fail('an image URL must not carry credentials', 'url_parsing');
  if (!hostMatches(url, allowedHosts)) {
    return fail(
      `image URLs are fetched only from the hosts in emulator.imageFetch.allowedHosts; ${JSON.stringify(url.host)} is not one of them ` +
        '(send the image inline as a data: URL, or reference a stream frame)',
      'url_not_allowed',
    );
  }
  return { ok: true, value: { kind: 'url', url } };
}

/** Reads a body up to `max` bytes; null once it is longer. */
async function readCapped(res: Response, max: number): Promise<Buffer | null> {
  const declared = Number(res.headers.get('content-length'));
  if (Number.isFinite(declared) && declared > max) {
    await res.body?.cancel();
    return null;
  }
  const chunks: Uint8Array[] = [];
  let total = 0;
  const reader = res.body?.getReader();
  if (!reader) return Buffer.alloc(0);
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.length;
    if (total > max) {
      await reader.cancel();
      return null;
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks);
}

async function fetchBytes(url: URL, limits: ImageLimits, loc: string[], signal: AbortSignal): Promise<Buffer> {
  const fail = (msg: string, type: string) => validationError(`Image URL: ${msg}`, [{ loc, msg, type }]);
  const timeout = AbortSignal.timeout(limits.timeoutMs);
  try {
    // A redirect could lead off the allowed hosts: it is refused, not followed.
    const res = await fetch(url, {
      redirect: 'error',
      signal: AbortSignal.any([signal, timeout]),
      headers: { accept: 'image/jpeg, image/png' },
    });
    if (!res.ok) {
      await res.body?.cancel();
      throw fail(`fetching ${url.host} answered HTTP ${res.status}`, 'url_fetch');
    }
    const bytes = await readCapped(res, limits.maxBytes);
    if (!bytes) throw fail(`the image is larger than ${limits.maxBytes} bytes`, 'image_too_large');
    return bytes;
  } catch (err) {
    if ((err as { shape?: string }).shape === 'validation') throw err;
    if (signal.aborted) throw err;
    const why = timeout.aborted ? `timed out after ${limits.timeoutMs} ms` : `failed (${(err as Error).message})`;
    throw fail(`fetching ${url.host} ${why}`, 'url_fetch');
  }
}

/**
 * The image of a data or fetched URL as a frame: JPEG or PNG only, downscaled to `storeWidth` and
 * stored as JPEG like a stream frame. `index` 0 and stream time 0: it belongs to no stream.
 */
export async function loadImage(
  source: ImageSource,
  loc: string[],
  opts: ImageLimits & { storeWidth: number; jpegQuality: number; now: number; signal: AbortSignal },
): Promise<RequestImage> {
  const bytes = source.kind === 'data' ? source.bytes : await fetchBytes(source.url, opts, loc, opts.signal);
  if (bytes.length > opts.maxBytes)
    throw validationError('Image too large', [{ loc, msg: `the image is larger than ${opts.maxBytes} bytes`, type: 'image_too_large' }]);
  const bad = (msg: string, type: string) => validationError(`Image: ${msg}`, [{ loc, msg, type }]);
  let width: number;
  let height: number;
  let jpeg: Buffer;
  try {
    const img = sharp(bytes, { limitInputPixels: MAX_INPUT_PIXELS, failOn: 'error' });
    const meta = await img.metadata();
    if (meta.format !== 'jpeg' && meta.format !== 'png')
      throw bad(`must be a JPEG or PNG image, got ${meta.format ?? 'an unknown format'}`, 'image_type');
    width = meta.autoOrient?.width ?? meta.width ?? 0;
    height = meta.autoOrient?.height ?? meta.height ?? 0;
    const target = storedSize(width, height, opts.storeWidth);
    jpeg = await img
      .rotate()
      .resize({ width: target.width, height: target.height, fit: 'fill' })
      .flatten({ background: '#000000' })
      .jpeg({ quality: opts.jpegQuality })
      .toBuffer();
  } catch (err) {
    if ((err as { shape?: string }).shape === 'validation') throw err;
    throw bad(`could not be decoded (${(err as Error).message})`, 'image_decode');
  }
  return {
    frame: { index: 0, capturedAtMs: opts.now, streamTimeMs: 0, width, height, jpeg },
    digest: createHash('sha1').update(bytes).digest('base64'),
  };
}

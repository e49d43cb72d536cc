import { randomFillSync } from 'node:crypto';

/**
 * Random bytes as hex, drawn from a pool refilled 4 KiB at a time: a trace or span id per upstream
 * call costs a slice of it, not a call into OpenSSL and a new Buffer each (randomBytes was ≈ 2 % of
 * a busy replica's CPU in `npm run bench scale`).
 */
const POOL = Buffer.allocUnsafe(4096);
let offset = POOL.length;

export function randomHex(bytes: number): string {
  if (offset + bytes > POOL.length) {
    randomFillSync(POOL);
    offset = 0;
  }
  const hex = POOL.toString('hex', offset, offset + bytes);
  offset += bytes;
  return hex;
}

/**
 * Sealing what the fleet must share to act for a session (the client's API key): AES-256-GCM with
 * a key derived from GATEWAY_SECRET, the stream id as associated data, so a sealed key copied onto
 * another stream's record does not open. Without the secret a Redis dump reveals no API key.
 */
import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';

const VERSION = 'v1';
const IV_BYTES = 12;
const TAG_BYTES = 16;

/** The secret fails this when shorter than 32 characters (config checks it at boot). */
export const MIN_SECRET_LENGTH = 32;

export class Sealer {
  private readonly key: Buffer;

  constructor(secret: string) {
    if (secret.length < MIN_SECRET_LENGTH) throw new Error(`GATEWAY_SECRET must be at least ${MIN_SECRET_LENGTH} characters`);
    this.key = Buffer.from(hkdfSync('sha256', secret, 'legacy-gateway', 'session-key-seal v1', 32));
  }

  /** `v1.<iv>.<ciphertext+tag>` (base64url), bound to `context` (the stream id). */
  seal(plain: string, context: string): string {
    const iv = randomBytes(IV_BYTES);
    const c = createCipheriv('aes-256-gcm', this.key, iv);
    c.setAAD(Buffer.from(context));
    const body = Buffer.concat([c.update(plain, 'utf8'), c.final(), c.getAuthTag()]);
    return `${VERSION}.${iv.toString('base64url')}.${body.toString('base64url')}`;
  }

  /** The plain text, or undefined when the box is malformed, for another context, or another secret. */
  open(sealed: string, context: string): string | undefined {
    const [version, ivText, bodyText] = sealed.split('.');
    if (version !== VERSION || !ivText || !bodyText) return undefined;
    const iv = Buffer.from(ivText, 'base64url');
    const body = Buffer.from(bodyText, 'base64url');
    if (iv.length !== IV_BYTES || body.length < TAG_BYTES) return undefined;
    try {
      const d = createDecipheriv('aes-256-gcm', this.key, iv);
      d.setAAD(Buffer.from(context));
      d.setAuthTag(body.subarray(body.length - TAG_BYTES));
      return Buffer.concat([d.update(body.subarray(0, body.length - TAG_BYTES)), d.final()]).toString('utf8');
    } catch {
      return undefined;
    }
  }
}

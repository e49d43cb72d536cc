/**
 * Camera sources: `POST /v1beta/streams` with `source: {type: "rtsp" | "hls", url}` (the provider's
 * camera-sources page). The provider pulls the video itself; the emulator checks what it can
 * without speaking RTSP or HLS — the scheme fits the type, the host resolves to public addresses
 * (private, loopback, link-local and other special ranges are refused unless the host is in
 * `emulator.cameraSources.allowedHosts`), and a TCP connection to it opens within
 * `connectTimeoutMs` — and pulls no media: frames come from the synthetic publisher (control API or
 * `emulator.autoPublish`), which stands in for the pull. A source that fails a check is the
 * provider's 422 `{detail: "Could not connect to source url (check reachability and credentials)"}`.
 * The url is never returned: rtsp urls commonly carry camera credentials.
 */
import { lookup } from 'node:dns/promises';
import net from 'node:net';
import { z } from 'zod';
import { detailError, validationError } from '../lib/errors';
import { hostMatches } from './images';

export type CameraSourceType = 'rtsp' | 'hls';

export interface CameraSourceConfig {
  allowedHosts: readonly string[];
  connectTimeoutMs: number;
}

const SCHEMES: Record<CameraSourceType, Record<string, number>> = {
  rtsp: { 'rtsp:': 554, 'rtsps:': 322 },
  hls: { 'http:': 80, 'https:': 443 },
};

export const UNREACHABLE_MESSAGE = 'Could not connect to source url (check reachability and credentials)';

const bodySchema = z.looseObject({
  source: z.strictObject({ type: z.enum(['rtsp', 'hls']), url: z.string().min(1).max(4096) }).nullish(),
});

/** The create body's `source`, or null for a client-published stream; 422 in the validation shape when malformed. */
export function parseCreateBody(body: unknown): { type: CameraSourceType; url: string } | null {
  if (body === undefined || body === null || (typeof body === 'object' && !Array.isArray(body) && Object.keys(body).length === 0))
    return null;
  const r = bodySchema.safeParse(body);
  if (!r.success) {
    const details = r.error.issues.map((i) => ({ loc: ['body', ...i.path.map(String)], msg: i.message, type: i.code }));
    throw validationError('Request validation failed', details);
  }
  return r.data.source ?? null;
}

/** Addresses a camera url may not lead to (the provider: private, loopback, link-local), and other non-public ranges. */
const BLOCKED = new net.BlockList();
for (const [net4, bits] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const) {
  BLOCKED.addSubnet(net4, bits, 'ipv4');
}
for (const [net6, bits] of [
  ['::', 128],
  ['::1', 128],
  ['fc00::', 7],
  ['fe80::', 10],
  ['ff00::', 8],
] as const) {
  BLOCKED.addSubnet(net6, bits, 'ipv6');
}

export function isPublicAddress(address: string): boolean {
  const family = net.isIP(address);
  if (family === 0) return false;
  // An IPv4-mapped IPv6 address is judged as the IPv4 address it carries.
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped) return !BLOCKED.check(mapped[1]!, 'ipv4');
  return !BLOCKED.check(address, family === 4 ? 'ipv4' : 'ipv6');
}

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms`)), ms);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

function connect(address: string, port: number, timeoutMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: address, port });
    const done = (err?: Error) => {
      socket.destroy();
      if (err) reject(err);
      else resolve();
    };
    socket.setTimeout(timeoutMs, () => done(new Error(`connect timed out after ${timeoutMs} ms`)));
    socket.once('connect', () => done());
    socket.once('error', done);
  });
}

/**
 * Checks that a camera source could be opened (see the module comment). Resolves, or throws the
 * provider's 422; `why` of a refusal is for the log only.
 */
export async function checkCameraSource(
  source: { type: CameraSourceType; url: string },
  cfg: CameraSourceConfig,
  log: (why: string) => void = () => undefined,
): Promise<void> {
  const refuse = (why: string) => {
    log(why);
    return detailError(422, 'source_unreachable', UNREACHABLE_MESSAGE);
  };
  let url: URL;
  try {
    url = new URL(source.url);
  } catch {
    throw refuse('not a URL');
  }
  const defaultPort = SCHEMES[source.type][url.protocol];
  if (defaultPort === undefined) throw refuse(`scheme ${url.protocol} does not fit type ${source.type}`);
  const hostname = url.hostname.replace(/^\[(.*)\]$/, '$1');
  if (!hostname) throw refuse('no host');
  const allowed = hostMatches(url, cfg.allowedHosts);
  const started = Date.now();
  let addresses: string[];
  try {
    addresses = net.isIP(hostname)
      ? [hostname]
      : (await withTimeout(lookup(hostname, { all: true }), cfg.connectTimeoutMs)).map((a) => a.address);
  } catch (err) {
    throw refuse(`${hostname} does not resolve (${(err as Error).message})`);
  }
  if (addresses.length === 0) throw refuse(`${hostname} does not resolve`);
  if (!allowed) {
    const blocked = addresses.find((a) => !isPublicAddress(a));
    if (blocked) throw refuse(`${hostname} resolves to ${blocked}, which is not publicly routable`);
  }
  // Connect to the address checked, not the name again (a second lookup could answer otherwise).
  const port = url.port ? Number(url.port) : defaultPort;
  const left = Math.max(1, cfg.connectTimeoutMs - (Date.now() - started));
  try {
    await connect(addresses[0]!, port, left);
  } catch (err) {
    throw refuse(`${addresses[0]}:${port} did not accept a connection (${(err as Error).message})`);
  }
}

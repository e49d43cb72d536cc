/**
 * The client's address behind trusted proxies (`server.trustProxy`), with the semantics of
 * Express's `trust proxy` and `proxy-addr`: walking `X-Forwarded-For` from the socket's peer
 * towards the client, each hop is believed only while the address it came from is trusted. Off,
 * the client is the socket's peer and `X-Forwarded-For` is ignored (nobody can choose their
 * address by sending one).
 */
import type { IncomingMessage } from 'node:http';
import proxyaddr from 'proxy-addr';

/**
 * `false`: off. A number: trust that many hops in front of the gateway. A list: trust peers in
 * these addresses, CIDRs or named ranges (`loopback`, `linklocal`, `uniquelocal`).
 */
export type TrustProxy = false | number | string[];

/** Is the hop at `addr`, `i` hops from the gateway (0 = the socket's peer), a trusted proxy. */
export type TrustFn = (addr: string, i: number) => boolean;

const TRUST_ALL =
  '`true` would trust every hop, so any client could choose its address with X-Forwarded-For: ' +
  'give the number of proxies in front of the gateway or their addresses';

/**
 * A configured value (JSON or the `TRUST_PROXY` string: `false`, `2`, `loopback`,
 * `10.0.0.0/8, 127.0.0.1`) as a `TrustProxy`; throws a message naming what is wrong.
 */
export function parseTrustProxy(value: unknown): TrustProxy {
  let v = value;
  if (typeof v === 'string') {
    const s = v.trim();
    if (/^(false|off|no|none)$/i.test(s) || s === '') return false;
    if (/^(true|on|yes)$/i.test(s)) throw new Error(TRUST_ALL);
    v = /^\d+$/.test(s)
      ? Number(s)
      : s
          .split(',')
          .map((p) => p.trim())
          .filter(Boolean);
  }
  if (v === false) return false;
  if (v === true) throw new Error(TRUST_ALL);
  if (typeof v === 'number') {
    if (!Number.isSafeInteger(v) || v < 0) throw new Error(`a hop count must be a whole number of 0 or more, got ${v}`);
    return v === 0 ? false : v;
  }
  if (!Array.isArray(v) || !v.every((p) => typeof p === 'string'))
    throw new Error('expected false, a hop count, or a list of addresses, CIDRs or named ranges');
  const list = v.map((p) => p.trim()).filter(Boolean);
  if (list.length === 0) return false;
  try {
    proxyaddr.compile(list);
  } catch (err) {
    throw new Error(`${(err as Error).message} (use addresses, CIDRs, or loopback / linklocal / uniquelocal)`);
  }
  return list;
}

/** The trust function of a setting, as Express compiles its `trust proxy`; undefined when off. */
export function compileTrust(setting: TrustProxy): TrustFn | undefined {
  if (setting === false) return undefined;
  if (typeof setting === 'number') return (_addr, i) => i < setting;
  return proxyaddr.compile(setting);
}

/** The request's `X-Forwarded-For` values joined as Node joins repeated ones, read from the raw list (`req.headers` is never built on the passthrough). */
function forwardedFor(req: IncomingMessage): string | undefined {
  const raw = req.rawHeaders;
  let xff: string | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    if (raw[i]!.length === 15 && raw[i]!.toLowerCase() === 'x-forwarded-for')
      xff = xff === undefined ? raw[i + 1]! : `${xff}, ${raw[i + 1]!}`;
  }
  return xff;
}

const MEMO = Symbol('clientAddress');
type Memo = IncomingMessage & { [MEMO]?: string };

/** Reads a request's client address; the same answer for an Express request and the raw node:http one it wraps. */
export type ClientAddress = (req: IncomingMessage) => string;

/**
 * The one client-address reader of a gateway (compiled once at boot): derived once per request
 * (memoized on it) for the failed-authentication budget, access lines and logs alike. Off, it is
 * the socket's peer. `unknown` when the socket is already gone.
 */
export function clientAddresses(trust: TrustFn | undefined): ClientAddress {
  if (!trust) return (req) => req.socket.remoteAddress ?? 'unknown';
  return (req) => {
    const memo = req as Memo;
    if (memo[MEMO] !== undefined) return memo[MEMO];
    const peer = req.socket.remoteAddress;
    const xff = peer === undefined ? undefined : forwardedFor(req);
    // proxy-addr reads only the socket and this one header.
    const addr =
      xff === undefined
        ? peer
        : proxyaddr({ socket: req.socket, headers: { 'x-forwarded-for': xff } } as unknown as IncomingMessage, trust);
    return (memo[MEMO] = addr ?? 'unknown');
  };
}

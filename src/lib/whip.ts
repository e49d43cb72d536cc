/**
 * A WHIP client (RFC 9725) as a media room's publisher needs it: offer → answer, the session's
 * resource and ICE servers, and its end. The gateway publishes a legacy webrtc client's own offer
 * this way (the media then flows client → room), and the conformance kit checks that a room takes
 * WHIP publishers. LiveKit servers (1.9+) serve it at `<room https url>/whip/v1`.
 */

/** One ICE server a WHIP endpoint names in a `Link: <url>; rel="ice-server"` header. */
export interface IceServerLink {
  urls: string;
  username?: string;
  credential?: string;
}

/** A published WHIP session. */
export interface WhipSession {
  /** Absolute URL of the session resource (the `Location` header, resolved): DELETE ends it. */
  resource: string;
  /** The ICE session tag (`ETag`) trickle PATCHes name; '' when the room sent none. */
  etag: string;
  /** The room's answer, with every candidate of the room (answered after its gathering). */
  answerSdp: string;
  iceServers: IceServerLink[];
}

/**
 * How a WHIP request failed: `refused` (the room refused the offer: 400, 413, 415, 422),
 * `unauthorized` (the token: 401, 403), `unsupported` (no WHIP there: 404, 405, 501), `failed`
 * (any other status), `invalid_answer` (a 201 without an SDP answer or a `Location`), `timeout`,
 * `unreachable` (no answer).
 */
export type WhipFailure = 'refused' | 'unauthorized' | 'unsupported' | 'failed' | 'invalid_answer' | 'timeout' | 'unreachable';

export class WhipError extends Error {
  override name = 'WhipError';
  constructor(
    readonly failure: WhipFailure,
    /** The room's HTTP status (null: none came). */
    readonly status: number | null,
    /** What the room said (its `{"error": …}` or text body, at most 300 characters), or why nothing came. */
    readonly roomMessage: string,
  ) {
    super(`WHIP ${failure}${status === null ? '' : ` (${status})`}: ${roomMessage}`);
  }
}

/** The WHIP endpoint of a room URL: `wss://host/p` → `https://host/p/whip/v1` (`ws` → `http`). */
export function whipEndpoint(roomUrl: string): string {
  const url = new URL(roomUrl);
  if (url.protocol === 'wss:') url.protocol = 'https:';
  else if (url.protocol === 'ws:') url.protocol = 'http:';
  else if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new Error(`not a room URL: ${url.protocol}`);
  url.pathname = `${url.pathname.replace(/\/+$/, '')}/whip/v1`;
  url.search = '';
  url.hash = '';
  return url.toString();
}

const MESSAGE_CHARS = 300;

/** What a refusing room said: `{"error": "…"}` (LiveKit, whatever content type it labels it), else the text. */
function roomMessage(body: string): string {
  const text = body.trim();
  try {
    const parsed = JSON.parse(text) as unknown;
    if (parsed && typeof parsed === 'object') {
      const o = parsed as Record<string, unknown>;
      const message = o.error ?? o.message ?? o.detail;
      if (typeof message === 'string' && message) return message.slice(0, MESSAGE_CHARS);
    }
  } catch {
    // not JSON: the text itself
  }
  return text.slice(0, MESSAGE_CHARS) || 'no reason given';
}

function failureOf(status: number): WhipFailure {
  if (status === 400 || status === 413 || status === 415 || status === 422) return 'refused';
  if (status === 401 || status === 403) return 'unauthorized';
  if (status === 404 || status === 405 || status === 501) return 'unsupported';
  return 'failed';
}

/** Splits `text` at each `sep` outside `<…>` and double quotes (header elements at `,`, link parameters at `;`). */
function splitOutside(text: string, sep: ',' | ';'): string[] {
  const parts: string[] = [];
  let current = '';
  let angle = false;
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (quoted) {
      current += c;
      if (c === '\\' && i + 1 < text.length) current += text[++i];
      else if (c === '"') quoted = false;
      continue;
    }
    if (c === '"') quoted = true;
    else if (c === '<') angle = true;
    else if (c === '>') angle = false;
    else if (c === sep && !angle) {
      parts.push(current);
      current = '';
      continue;
    }
    current += c;
  }
  parts.push(current);
  return parts.map((p) => p.trim()).filter(Boolean);
}

function unquote(value: string): string {
  const v = value.trim();
  return v.startsWith('"') && v.endsWith('"') && v.length >= 2 ? v.slice(1, -1).replace(/\\(.)/g, '$1') : v;
}

function decoded(url: string): string {
  try {
    // LiveKit path-escapes the URL (`?transport=udp` arrives as `%3Ftransport=udp`).
    return decodeURIComponent(url);
  } catch {
    return url;
  }
}

/** The ICE servers of `Link` header values (`rel="ice-server"` elements; others ignored). */
export function parseIceServerLinks(values: readonly string[]): IceServerLink[] {
  const out: IceServerLink[] = [];
  for (const element of values.flatMap((v) => splitOutside(v, ','))) {
    const m = /^<([^>]*)>(.*)$/s.exec(element);
    if (!m) continue;
    const params = new Map<string, string>();
    for (const raw of splitOutside(m[2]!, ';')) {
      const eq = raw.indexOf('=');
      if (eq < 0) continue;
      params.set(raw.slice(0, eq).trim().toLowerCase(), unquote(raw.slice(eq + 1)));
    }
    if (!(params.get('rel') ?? '').split(/\s+/).includes('ice-server')) continue;
    const server: IceServerLink = { urls: decoded(m[1]!.trim()) };
    const username = params.get('username');
    const credential = params.get('credential');
    if (username !== undefined) server.username = username;
    if (credential !== undefined) server.credential = credential;
    out.push(server);
  }
  return out;
}

export interface WhipRequestOptions {
  /** The room token (a publish grant for the room): `Authorization: Bearer`. */
  token: string;
  /** How long the room may take to answer (it answers after its ICE gathering). */
  timeoutMs: number;
  signal?: AbortSignal;
}

async function request(url: string, init: RequestInit, opts: WhipRequestOptions): Promise<{ res: Response; body: string }> {
  const timeout = AbortSignal.timeout(opts.timeoutMs);
  const signal = opts.signal ? AbortSignal.any([opts.signal, timeout]) : timeout;
  try {
    const res = await fetch(url, { ...init, signal, headers: { ...init.headers, authorization: `Bearer ${opts.token}` } });
    return { res, body: await res.text() };
  } catch (err) {
    if (timeout.aborted) throw new WhipError('timeout', null, `no answer within ${opts.timeoutMs} ms`);
    if (opts.signal?.aborted) throw err;
    const cause = (err as { cause?: { code?: string; message?: string } }).cause;
    throw new WhipError('unreachable', null, cause?.code ?? cause?.message ?? (err as Error).message);
  }
}

/**
 * POSTs `offerSdp` to a WHIP endpoint: the session, or a `WhipError`. `Content-Type` is exactly
 * `application/sdp` (LiveKit refuses any other value, a charset parameter included).
 */
export async function publishWhip(endpoint: string, offerSdp: string, opts: WhipRequestOptions): Promise<WhipSession> {
  const { res, body } = await request(endpoint, { method: 'POST', headers: { 'content-type': 'application/sdp' }, body: offerSdp }, opts);
  if (res.status !== 201) throw new WhipError(failureOf(res.status), res.status, roomMessage(body));
  const location = res.headers.get('location');
  if (!location) throw new WhipError('invalid_answer', res.status, 'the room answered 201 without a Location');
  if (!/^v=0\r?$/m.test(body)) throw new WhipError('invalid_answer', res.status, 'the room answered 201 without an SDP answer');
  const links = res.headers.get('link');
  return {
    // Relative to the URL that answered (a WHIP endpoint may redirect the POST).
    resource: new URL(location, res.url || endpoint).toString(),
    etag: res.headers.get('etag') ?? '',
    answerSdp: body,
    iceServers: links ? parseIceServerLinks([links]) : [],
  };
}

/** DELETEs a WHIP session: true when the room ended it, false when it was gone already (404). */
export async function endWhip(resource: string, opts: WhipRequestOptions): Promise<boolean> {
  const { res, body } = await request(resource, { method: 'DELETE' }, opts);
  if (res.status === 404) return false;
  if (res.status >= 200 && res.status < 300) return true;
  throw new WhipError(failureOf(res.status), res.status, roomMessage(body));
}

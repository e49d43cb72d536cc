/**
 * The one legacy results-socket client: connects to `/v0.2/ws/streams/{id}` with `ws`, sends the
 * auth message (`{"api_key": …}`) first, keeps every result with when it arrived, and says how the
 * socket closed. The suites, the chaos runner and the fleet bench use it; `waitFor` and `next`
 * wait on the messages themselves (no polling).
 */
import type http from 'node:http';
import WebSocket from 'ws';
import type { ClientOptions } from 'ws';

/** How the socket closed (the close frame's code and reason; 1006 and '' when there was none). */
export interface Close {
  code: number;
  reason: string;
}

/** One message (a result or an end) the socket received, with when it arrived (this process's clock). */
export interface Received {
  /** The message's `id`, as a string (`'undefined'` for a message without one). */
  id: string;
  atMs: number;
  /** The frame's text as it came. */
  text: string;
  message: Record<string, unknown>;
}

export interface ResultsSocketOptions {
  /** Instead of `/v0.2/ws/streams/{streamId}`: any path (hostile paths, double slashes). */
  path?: string;
  /** The `ws` client's own options (a `localAddress` to connect from, extra headers). */
  ws?: ClientOptions;
  /** The bound `waitFor` and `next` put on a wait unless given one; `null`: none (bound it with `deadline`). */
  waitMs?: number | null;
  /** Called on every message as it arrives (after it is added to `received`). */
  onMessage?: (r: Received) => void;
}

export interface ResultsSocket {
  ws: WebSocket;
  streamId: string;
  /** Headers of the 101 answer (behind a balancer, `x-served-by` names the replica). */
  upgradeHeaders: http.IncomingHttpHeaders;
  /** The messages parsed, in arrival order. */
  messages: Record<string, unknown>[];
  /** The same messages with their arrival times and ids. */
  received: Received[];
  /** Resolves once the socket is open (the auth message sent); rejects when it could not open. */
  opened: Promise<void>;
  /** The HTTP status of an upgrade the server refused (set before `opened` rejects). */
  refusedStatus?: number;
  /** Resolves once the socket closed, whatever closed it (never rejects). */
  closed: Promise<Close>;
  isOpen(): boolean;
  /** Resolves with the first `n` messages once there are `n`; rejects when the socket closes first or the bound passes. */
  waitFor(n: number, timeoutMs?: number | null): Promise<Record<string, unknown>[]>;
  /** The message after the last one `next` gave (the first on the first call). */
  next(timeoutMs?: number | null): Promise<Record<string, unknown>>;
  /** Closes from this side; resolves with the close. */
  close(code?: number, reason?: string): Promise<Close>;
}

/**
 * Starts connecting and returns at once: `opened` and `closed` tell what happened. `key`: sent as
 * the first message once open; `null` sends nothing (the test sends its own, or tests the auth timeout).
 */
export function connectResults(url: string, streamId: string, key: string | null, opts: ResultsSocketOptions = {}): ResultsSocket {
  const path = opts.path ?? `/v0.2/ws/streams/${streamId}`;
  const ws = new WebSocket(`${url.replace(/^http/, 'ws')}${path}`, opts.ws);
  const defaultWaitMs = opts.waitMs === undefined ? 10_000 : opts.waitMs;
  const received: Received[] = [];
  const messages: Record<string, unknown>[] = [];
  const upgradeHeaders: http.IncomingHttpHeaders = {};
  const waiters: (() => void)[] = [];
  const wake = () => {
    for (const w of waiters.splice(0)) w();
  };
  ws.once('upgrade', (res) => Object.assign(upgradeHeaders, res.headers));
  ws.on('message', (d) => {
    const text = d.toString();
    const message = JSON.parse(text) as Record<string, unknown>;
    const r = { id: String(message.id), atMs: Date.now(), text, message };
    received.push(r);
    messages.push(message);
    opts.onMessage?.(r);
    wake();
  });
  // An 'error' is always followed by a 'close'; `opened` carries it.
  ws.on('error', () => undefined);
  const closed = new Promise<Close>((resolve) =>
    ws.once('close', (code, reason) => {
      resolve({ code, reason: reason.toString() });
      wake();
    }),
  );
  const sock: ResultsSocket = {
    ws,
    streamId,
    upgradeHeaders,
    messages,
    received,
    opened: new Promise<void>((resolve, reject) => {
      ws.once('open', () => {
        if (key !== null) ws.send(JSON.stringify({ api_key: key }));
        resolve();
      });
      ws.once('unexpected-response', (_req, res) => {
        sock.refusedStatus = res.statusCode ?? 0;
        reject(new Error(`the upgrade was refused: HTTP ${sock.refusedStatus}`));
        res.resume();
        ws.terminate();
      });
      ws.once('error', reject);
    }),
    closed,
    isOpen: () => ws.readyState === ws.OPEN,
    waitFor: (n, timeoutMs = defaultWaitMs) =>
      new Promise((resolve, reject) => {
        const t =
          timeoutMs === null
            ? undefined
            : setTimeout(() => reject(new Error(`${streamId}: only ${messages.length}/${n} results after ${timeoutMs} ms`)), timeoutMs);
        const check = () => {
          if (messages.length >= n) {
            clearTimeout(t);
            resolve(messages.slice(0, n));
          } else if (ws.readyState === ws.CLOSED) {
            clearTimeout(t);
            reject(new Error(`${streamId}: socket closed after ${messages.length}/${n} results`));
          } else waiters.push(check);
        };
        check();
      }),
    next: async (timeoutMs) => {
      const i = taken++;
      return (await sock.waitFor(i + 1, timeoutMs))[i]!;
    },
    close: (code, reason) => {
      ws.close(code, reason);
      return closed;
    },
  };
  let taken = 0;
  sock.opened.catch(() => undefined);
  return sock;
}

/** A results socket once it is open and has sent `key` (`null`: nothing); rejects when it cannot open. */
export async function openResults(
  url: string,
  streamId: string,
  key: string | null,
  opts: ResultsSocketOptions = {},
): Promise<ResultsSocket> {
  const sock = connectResults(url, streamId, key, opts);
  await sock.opened;
  return sock;
}

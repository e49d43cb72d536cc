import type http from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer } from 'ws';
import type WebSocket from 'ws';
import type { LegacyConfig } from '../../../config';
import type { ClientAddress } from '../../../lib/client-address';
import { idKey } from '../../../lib/id-key';
import { keyHash } from '../../../lib/keys';
import type { Logger } from '../../../lib/logger';
import { redactQuery } from '../../../lib/redact-query';
import { ATTR, inSpanSync, tracingOn } from '../../../lib/spans';
import type { TraceIds } from '../../../lib/spans';
import type { StreamRecord, Store, Unsubscribe } from '../../store/store';
import { CLIENT_REQUESTED, LEGACY_CLOSES, SERVER_SHUTDOWN, endClose } from '../contract/closes';
import type { LegacyClose } from '../contract/closes';
import { decodeEnvelope, resultsChannel } from '../streams/results-channel';

/**
 * A refusal closes 1008 (fatal in legacy clients) unless it gives `code`: 1013 "try again later"
 * for a refusal that is not about the key (the client address is over its failed-auth budget). An authorize that throws (upstream
 * outage) closes 1011, which clients retry.
 */
export type SocketAuth =
  | { ok: true; record: StreamRecord }
  | { ok: false; reason: string; /** Close code (default 1008, failed authentication). */ code?: number };

export interface ResultsSocketHooks {
  /** A socket authenticated for this stream (`record` as the authorization read it). */
  onOpen?(streamId: string, record: StreamRecord): void;
  onClose?(streamId: string): void;
  onShed?(streamId: string): void;
  /** A result whose id this stream's sockets here were sent already was dropped. */
  onRepeat?(streamId: string): void;
}

export interface ResultsSocketOptions {
  cfg: LegacyConfig;
  logger: Logger;
  store: Store;
  /** Checks the first message's key against the stream (valid key, same account); `ip` is the client's (`clientAddress`). */
  authorize(apiKey: string, streamId: string, ip: string): Promise<SocketAuth>;
  /** The upgrade request's client address (`server.trustProxy`); default: the socket's peer. */
  clientAddress?: ClientAddress;
  /** Extra headers on the 101 response (deprecation headers). */
  upgradeHeaders?: () => string[];
  hooks?: ResultsSocketHooks;
}

/** Who a socket is: its stream, its client address (`clientAddress`) and, once sent, its key. */
interface SocketPeer {
  streamId: string;
  ip: string;
  key?: string;
}

/** The id segment is taken as is; whether it is a stream id is `access.ts`'s rule (in `authorize`). */
const PATH = /^\/+v0\.2\/+ws\/+streams\/+([^/?]+)\/*(?:\?.*)?$/;

const close = (ws: WebSocket, c: LegacyClose) => ws.close(c.code, c.reason);

/**
 * One stream's results sockets on this replica: one handler on the store's subscription to its
 * results channel (the store keeps one subscription per channel), fanning each message out to them
 * with the state that must see each message once per stream (repeats, the fan-out span).
 */
interface StreamSockets {
  readonly sockets: Set<WebSocket>;
  subscribed: Promise<Unsubscribe>;
  /** The stream's create, which fan-out spans link to. */
  readonly ids?: TraceIds;
  /** The `idKey`s of the last results delivered here, oldest first (`RECENT_RESULTS` at most). */
  readonly recent: string[];
}

/**
 * Result ids a stream's sockets remember: a tick run again after a store failover lost its commit
 * (same stream, same tick, so the same id) is not delivered twice. Ticks are re-run within a few
 * periods of the original, so a short memory covers them.
 */
const RECENT_RESULTS = 16;

/** True the first time `id` is seen by `group` (remembered as its `idKey`: the id is a slice of the whole message), false for a repeat. */
function firstDelivery(group: StreamSockets, id: string): boolean {
  const key = idKey(id);
  if (group.recent.includes(key)) return false;
  group.recent.push(key);
  if (group.recent.length > RECENT_RESULTS) group.recent.shift();
  return true;
}

/**
 * `WS /v0.2/ws/streams/{id}`: authenticate with the first message, then push every later result of
 * the stream. Close 1008 on failed auth (1011 when it could not be checked, 1013 when the client
 * address is over its failed-auth budget); 1001 with the end reason when the stream ends (at once for
 * a tombstone). Slow consumers are shed, never allowed to hold memory or block other sockets.
 */
export class ResultsSockets {
  private readonly wss: WebSocketServer;
  private readonly alive = new WeakMap<WebSocket, boolean>();
  private readonly streamOf = new WeakMap<WebSocket, string>();
  /** Streams with sockets here, one fan-out group each. */
  private readonly streams = new Map<string, StreamSockets>();
  private readonly heartbeat: NodeJS.Timeout;

  constructor(private readonly opts: ResultsSocketOptions) {
    this.wss = new WebSocketServer({ noServer: true, maxPayload: opts.cfg.wsMaxPayloadBytes, clientTracking: true });
    if (opts.upgradeHeaders) {
      const extra = opts.upgradeHeaders;
      this.wss.on('headers', (headers) => headers.push(...extra()));
    }
    this.heartbeat = setInterval(() => this.sweep(), opts.cfg.wsHeartbeatMs);
    this.heartbeat.unref();
  }

  /** Takes the upgrade if the path is a results socket; false otherwise. */
  handleUpgrade(req: http.IncomingMessage, socket: Duplex, head: Buffer): boolean {
    const m = PATH.exec(req.url ?? '');
    if (!m) return false;
    let streamId: string;
    try {
      streamId = decodeURIComponent(m[1]!);
    } catch {
      // A malformed escape in the path: refuse the upgrade, never throw in the upgrade listener.
      socket.end('HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n');
      this.opts.logger.info(
        { url: redactQuery(req.url ?? ''), status: 400, remoteAddress: this.addressOf(req) },
        'results socket refused: malformed stream id in the path (400)',
      );
      return true;
    }
    const ip = this.addressOf(req);
    this.wss.handleUpgrade(req, socket, head, (ws) => this.accept(ws, streamId, ip));
    return true;
  }

  private addressOf(req: http.IncomingMessage): string {
    return this.opts.clientAddress?.(req) ?? req.socket.remoteAddress ?? 'unknown';
  }

  /**
   * Closes a socket the gateway will not serve, with one line saying why: the stream, the close,
   * the client address and the key's hash when it sent one (never the key). Info: a refusal is the
   * client's business, not the gateway's fault.
   */
  private refuse(ws: WebSocket, c: LegacyClose, peer: SocketPeer): void {
    this.opts.logger.info(
      { streamId: peer.streamId, code: c.code, reason: c.reason, remoteAddress: peer.ip, ...(peer.key ? { key: keyHash(peer.key) } : {}) },
      `results socket refused: ${c.reason} (${c.code})`,
    );
    close(ws, c);
  }

  private accept(ws: WebSocket, streamId: string, ip: string): void {
    const { cfg, logger } = this.opts;
    this.alive.set(ws, true);
    this.streamOf.set(ws, streamId);
    ws.on('pong', () => this.alive.set(ws, true));
    ws.on('error', (err) => logger.debug({ err, streamId }, 'results socket error'));
    const authTimer = setTimeout(() => this.refuse(ws, LEGACY_CLOSES.authTimeout, { streamId, ip }), cfg.wsAuthTimeoutMs);
    ws.once('close', () => clearTimeout(authTimer));
    ws.once('message', (data, isBinary) => {
      clearTimeout(authTimer);
      const key = isBinary ? undefined : apiKeyOf(data.toString());
      if (!key) {
        this.refuse(ws, LEGACY_CLOSES.badFirstMessage, { streamId, ip });
        return;
      }
      this.opts
        .authorize(key, streamId, ip)
        .then((auth) =>
          auth.ok
            ? this.attach(ws, auth.record, { streamId, ip, key })
            : this.refuse(ws, { code: auth.code ?? 1008, reason: auth.reason }, { streamId, ip, key }),
        )
        .catch((err: unknown) => {
          logger.warn({ err, streamId }, 'results socket authorization failed');
          close(ws, LEGACY_CLOSES.authUnavailable);
        });
    });
  }

  private async attach(ws: WebSocket, record: StreamRecord, peer: SocketPeer): Promise<void> {
    if (ws.readyState !== ws.OPEN) return;
    const { streamId } = peer;
    const { hooks } = this.opts;
    const group = this.join(streamId, record);
    group.sockets.add(ws);
    try {
      await group.subscribed;
    } catch (err) {
      group.sockets.delete(ws);
      throw err;
    }
    // The socket may have closed while the subscription was confirmed.
    if (ws.readyState !== ws.OPEN) {
      this.leave(streamId, group, ws);
      return;
    }
    hooks?.onOpen?.(streamId, record);
    ws.once('close', () => {
      this.leave(streamId, group, ws);
      hooks?.onClose?.(streamId);
    });
    // Subscribed first, then checked: an end published in between is not missed.
    const rec = await this.opts.store.getRecord(streamId);
    if (!rec) this.refuse(ws, LEGACY_CLOSES.streamNotFound, peer);
    else if (rec.state === 'ended') close(ws, endClose(rec.endReason ?? 'ended'));
  }

  /** The stream's sockets here, its group's handler added for the first one (a failed subscription is forgotten: the next socket tries again). */
  private join(streamId: string, record: StreamRecord): StreamSockets {
    const known = this.streams.get(streamId);
    if (known) return known;
    const group: StreamSockets = { sockets: new Set(), subscribed: Promise.resolve(() => undefined), ids: record.ids, recent: [] };
    group.subscribed = this.opts.store.subscribe(resultsChannel(streamId), (msg) => this.deliver(streamId, group, msg));
    group.subscribed.catch(() => {
      if (this.streams.get(streamId) === group) this.streams.delete(streamId);
    });
    this.streams.set(streamId, group);
    return group;
  }

  /** A socket leaves its stream's group; the last one removes the group's handler. */
  private leave(streamId: string, group: StreamSockets, ws: WebSocket): void {
    if (!group.sockets.delete(ws) || group.sockets.size > 0) return;
    if (this.streams.get(streamId) === group) this.streams.delete(streamId);
    group.subscribed.then(
      (unsubscribe) => unsubscribe(),
      () => undefined,
    );
  }

  /**
   * One message of a stream's channel to its sockets here: an end closes them, a result goes to
   * each (slow consumers shed). Traced as `legacy.results.fanout` with the number of sockets
   * reached: under the tick when the commit delivers in process, else a trace linked to the create.
   */
  private deliver(streamId: string, group: StreamSockets, msg: string): void {
    const envelope = decodeEnvelope(msg);
    if (!envelope) return void this.opts.logger.warn({ streamId }, 'ignored a malformed results channel message');
    if (envelope.kind === 'end') {
      for (const ws of group.sockets) this.closeForEnd(ws, envelope.reason);
      return;
    }
    const { json, resultId } = envelope;
    if (resultId && !firstDelivery(group, resultId)) return void this.opts.hooks?.onRepeat?.(streamId);
    if (!tracingOn()) return void this.send(streamId, group, json);
    const attributes = { [ATTR.streamId]: streamId, ...(resultId ? { [ATTR.resultId]: resultId } : {}) };
    inSpanSync('legacy.results.fanout', { attributes, link: group.ids }, (span) => {
      const { sent, shed } = this.send(streamId, group, json);
      span?.setAttributes({ [ATTR.sockets]: sent, [ATTR.shed]: shed });
    });
  }

  /** Sends a result's JSON to each open socket of the group. */
  private send(streamId: string, group: StreamSockets, payload: string): { sent: number; shed: number } {
    const { cfg, hooks } = this.opts;
    let sent = 0;
    let shed = 0;
    for (const ws of group.sockets) {
      if (ws.readyState !== ws.OPEN) continue;
      if (ws.bufferedAmount > cfg.wsMaxBufferedBytes) {
        hooks?.onShed?.(streamId);
        shed++;
        continue;
      }
      ws.send(payload);
      sent++;
    }
    return { sent, shed };
  }

  private closeForEnd(ws: WebSocket, reason: string): void {
    if (ws.readyState !== ws.OPEN) return;
    // A client's DELETE: its own socket may be closing right after the answer; the others close after the grace.
    const { stopGraceMs } = this.opts.cfg;
    if (reason === CLIENT_REQUESTED && stopGraceMs > 0) {
      const timer = setTimeout(() => close(ws, endClose(reason)), stopGraceMs);
      ws.once('close', () => clearTimeout(timer));
    } else close(ws, endClose(reason));
  }

  /** Heartbeat: a socket that did not answer the last ping is dead. */
  private sweep(): void {
    for (const ws of this.wss.clients) {
      if (!this.alive.get(ws)) {
        ws.terminate();
        continue;
      }
      this.alive.set(ws, false);
      ws.ping();
    }
  }

  get connections(): number {
    return this.wss.clients.size;
  }

  /**
   * Closes every socket (shutdown): 1001 with an end reason, or the close given (a handover's 1012).
   * Sockets of the `ended` streams close 1001 `server_shutdown` whatever the rest get: their end,
   * published just before, may still be on its way from the store.
   */
  async close(how: string | LegacyClose = SERVER_SHUTDOWN, ended: ReadonlySet<string> = new Set()): Promise<void> {
    clearInterval(this.heartbeat);
    const c = typeof how === 'string' ? endClose(how) : how;
    for (const ws of this.wss.clients) close(ws, ended.has(this.streamOf.get(ws) ?? '') ? endClose(SERVER_SHUTDOWN) : c);
    await new Promise<void>((resolve) => this.wss.close(() => resolve()));
  }
}

function apiKeyOf(text: string): string | undefined {
  try {
    const parsed: unknown = JSON.parse(text);
    const key = (parsed as { api_key?: unknown } | null)?.api_key;
    return typeof key === 'string' && key.length > 0 ? key : undefined;
  } catch {
    return undefined;
  }
}

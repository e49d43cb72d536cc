/**
 * The results socket on its own: auth timeout, heartbeat, shedding a slow consumer without
 * blocking the others, ordering, and the closes at shutdown — on a real HTTP server with the
 * memory store.
 */
import { deadline, sleep, until } from '../../helpers/time';
import http from 'node:http';
import WebSocket from 'ws';
import { loadConfig } from '../../../src/config';
import { closeServer, listen } from '../../../src/lib/listen';
import { createLogger } from '../../../src/lib/logger';
import { LEGACY_CLOSES } from '../../../src/gateway/legacy/contract/closes';
import { ResultsSockets } from '../../../src/gateway/legacy/http/results-socket';
import { endEnvelope, resultEnvelope, resultsChannel } from '../../../src/gateway/legacy/sessions/results-channel';
import { MemoryStore } from '../../../src/gateway/store/memory';
import { sessionRecord } from '../../helpers/stack';

const record = (streamId: string) => sessionRecord(streamId);

describe('ResultsSockets', () => {
  let server: http.Server;
  let url: string;
  let store: MemoryStore;
  let sockets: ResultsSockets;
  let shed = 0;
  /** Streams of the sockets that authenticated and subscribed, in order (the server's onOpen). */
  const opened: string[] = [];
  const closedStreams: string[] = [];

  beforeAll(async () => {
    // Short enough for quick tests, long enough that a loaded machine's pause (timers run before
    // the socket data that was already waiting) neither times out an auth nor kills a live socket.
    const cfg = loadConfig({ env: {}, overrides: { legacy: { wsAuthTimeoutMs: 1000, wsHeartbeatMs: 1000, wsMaxBufferedBytes: 64 * 1024 } } });
    store = new MemoryStore();
    await store.putSession(record('s1'));
    await store.putSession(record('hb'));
    sockets = new ResultsSockets({
      cfg: cfg.legacy,
      logger: createLogger('silent'),
      store,
      authorize: async (key, streamId) => {
        const rec = await store.getSession(streamId);
        return key === 'good' && rec ? { ok: true, record: rec } : { ok: false, reason: 'authentication failed' };
      },
      hooks: { onOpen: (id) => opened.push(id), onShed: () => shed++, onClose: (id) => closedStreams.push(id) },
    });
    server = http.createServer((_req, res) => res.end());
    server.on('upgrade', (req, socket, head) => {
      if (!sockets.handleUpgrade(req, socket, head)) socket.destroy();
    });
    url = `ws://127.0.0.1:${await listen(server, 0, '127.0.0.1')}`;
  });
  afterAll(async () => {
    await sockets.close();
    await closeServer(server);
    await store.close();
  });

  const open = (path = '/v0.2/ws/streams/s1') =>
    new Promise<WebSocket>((resolve, reject) => {
      const ws = new WebSocket(url + path);
      ws.once('open', () => resolve(ws));
      ws.once('error', reject);
    });
  const closed = (ws: WebSocket) => new Promise<[number, string]>((r) => ws.once('close', (c, b) => r([c, b.toString()])));
  /** A socket whose key the server accepted and whose stream it subscribed (not a guess of how long that takes). */
  const authed = async (path?: string) => {
    const ws = await open(path);
    const before = opened.length;
    ws.send(JSON.stringify({ api_key: 'good' }));
    await deadline(until(() => opened.length > before, 5), 10_000, 'socket authenticated');
    return ws;
  };

  test('no first message within the timeout → 1008', async () => {
    const ws = await open();
    expect(await closed(ws)).toEqual([1008, 'authentication timeout']);
  });

  test('a wrong key → 1008; binary or non-object first frames → 1008', async () => {
    const a = await open();
    a.send(JSON.stringify({ api_key: 'bad' }));
    expect((await closed(a))[0]).toBe(1008);
    const b = await open();
    b.send(Buffer.from([1, 2, 3]));
    expect((await closed(b))[0]).toBe(1008);
    const c = await open();
    c.send('[]');
    expect((await closed(c))[0]).toBe(1008);
  });

  test('double slashes in the path are accepted; other paths are not taken', async () => {
    const ws = await authed('//v0.2//ws/streams/s1');
    expect(opened.at(-1)).toBe('s1');
    expect(ws.readyState).toBe(WebSocket.OPEN);
    ws.close();
    await expect(open('/v0.2/other')).rejects.toThrow();
  });

  test('results arrive in publish order on every socket; an end closes all with 1001 and the reason', async () => {
    const a = await authed();
    const b = await authed();
    const got: [string[], string[]] = [[], []];
    a.on('message', (d) => got[0].push(d.toString()));
    b.on('message', (d) => got[1].push(d.toString()));
    for (let i = 0; i < 50; i++) await store.publish(resultsChannel('s1'), resultEnvelope(JSON.stringify({ i })));
    await deadline(until(() => got[0].length >= 50 && got[1].length >= 50, 5), 10_000, 'every result on both sockets');
    const expected = Array.from({ length: 50 }, (_, i) => JSON.stringify({ i }));
    expect(got).toEqual([expected, expected]);
    const ends = [closed(a), closed(b)];
    await store.publish(resultsChannel('s1'), endEnvelope('lease_expired'));
    expect(await Promise.all(ends)).toEqual([
      [1001, 'lease_expired'],
      [1001, 'lease_expired'],
    ]);
  });

  test('a socket that answers no pings is terminated by the heartbeat', async () => {
    const ws = await authed('/v0.2/ws/streams/hb');
    // Stop the client from answering pings: pause its TCP socket (nothing read, nothing answered).
    (ws as unknown as { _socket: { pause(): void } })._socket.pause();
    // Gone server-side (after two or three heartbeat periods; the bound only turns a hang into a failure).
    await deadline(until(() => closedStreams.includes('hb'), 50), 10_000, 'the heartbeat terminated the socket');
    ws.terminate();
  });

  test('a slow consumer is shed (bounded memory) while a fast one gets everything', async () => {
    shed = 0;
    const slow = await authed();
    const fast = await authed();
    (slow as unknown as { _socket: { pause(): void } })._socket.pause();
    let fastCount = 0;
    fast.on('message', () => fastCount++);
    // 32 MiB in 8 KiB results: far more than loopback's kernel buffers hold for the paused reader.
    const msg = resultEnvelope(JSON.stringify({ pad: 'x'.repeat(8 * 1024) }));
    for (let i = 0; i < 4000; i++) {
      await store.publish(resultsChannel('s1'), msg);
      if (i % 8 === 0) await sleep(0);
    }
    // Until the fast reader has it all, or (some were shed) a bound: a loaded machine reads late, not less.
    await deadline(until(() => fastCount >= 4000), 10_000, 'every result').catch(() => undefined);
    expect(shed).toBeGreaterThan(0);
    // The reader keeps up (client and server share this process, so allow for a busy machine).
    expect(fastCount).toBeGreaterThanOrEqual(3600);
    slow.terminate();
    fast.close();
  });

  // Last: it closes the server's sockets for good.
  test('shutdown: sockets of the streams it ended close 1001 server_shutdown, the others get the close given (1012)', async () => {
    const [ended, handed] = [await authed('/v0.2/ws/streams/s1'), await authed('/v0.2/ws/streams/hb')];
    const closes = [closed(ended), closed(handed)];
    await sockets.close(LEGACY_CLOSES.replicaLeaving, new Set(['s1']));
    expect(await deadline(Promise.all(closes), 10_000, 'both closed')).toEqual([
      [1001, 'server_shutdown'],
      [1012, 'service_restart'],
    ]);
  });
});

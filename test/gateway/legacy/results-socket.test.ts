/**
 * The results socket on its own: auth timeout, heartbeat, shedding a slow consumer without
 * blocking the others, ordering, and the closes at shutdown — on a real HTTP server with the
 * memory store.
 */
import { deadline, sleep, until } from '../../helpers/time';
import http from 'node:http';
import { openResults } from '../../helpers/results-socket';
import { testConfig } from '../../helpers/config';
import { closeServer, listen } from '../../../src/lib/listen';
import { createLogger } from '../../../src/lib/logger';
import { LEGACY_CLOSES } from '../../../src/gateway/legacy/contract/closes';
import { ResultsSockets } from '../../../src/gateway/legacy/http/results-socket';
import { encodeEnvelope, resultsChannel } from '../../../src/gateway/legacy/streams/results-channel';
import { memoryStore } from '../../../src/gateway/store/memory';
import type { Store } from '../../../src/gateway/store/store';
import { streamRecord } from '../../helpers/stack';

const record = (streamId: string) => streamRecord(streamId);
const result = (json: string) => encodeEnvelope({ kind: 'result', json });

describe('ResultsSockets', () => {
  let server: http.Server;
  let url: string;
  let store: Store;
  let sockets: ResultsSockets;
  let shed = 0;
  let repeated = 0;
  /** Streams of the sockets that authenticated and subscribed, in order (the server's onOpen). */
  const opened: string[] = [];
  const closedStreams: string[] = [];

  beforeAll(async () => {
    // Short enough for quick tests, long enough that a loaded machine's pause (timers run before
    // the socket data that was already waiting) neither times out an auth nor kills a live socket.
    const cfg = testConfig({ legacy: { wsAuthTimeoutMs: 1000, wsHeartbeatMs: 1000, wsMaxBufferedBytes: 64 * 1024 } });
    store = memoryStore();
    await store.putRecord(record('s1'));
    await store.putRecord(record('hb'));
    await store.putRecord(record('dup'));
    sockets = new ResultsSockets({
      cfg: cfg.legacy,
      logger: createLogger('silent'),
      store,
      authorize: async (key, streamId) => {
        const rec = await store.getRecord(streamId);
        return key === 'good' && rec ? { ok: true, record: rec } : { ok: false, reason: 'authentication failed' };
      },
      hooks: { onOpen: (id) => opened.push(id), onShed: () => shed++, onRepeat: () => repeated++, onClose: (id) => closedStreams.push(id) },
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

  /** A socket that has sent nothing yet. */
  const open = (path?: string) => openResults(url, 's1', null, { path });
  /** A socket whose key the server accepted and whose stream it subscribed (not a guess of how long that takes). */
  const authed = async (path?: string) => {
    const before = opened.length;
    const sock = await openResults(url, 's1', 'good', { path });
    await deadline(
      until(() => opened.length > before, 5),
      10_000,
      'socket authenticated',
    );
    return sock;
  };

  test('no first message within the timeout → 1008', async () => {
    const ws = await open();
    expect(await ws.closed).toEqual({ code: 1008, reason: 'authentication timeout' });
  });

  test('a wrong key → 1008; binary or non-object first frames → 1008', async () => {
    const a = await openResults(url, 's1', 'bad');
    expect((await a.closed).code).toBe(1008);
    const b = await open();
    b.ws.send(Buffer.from([1, 2, 3]));
    expect((await b.closed).code).toBe(1008);
    const c = await open();
    c.ws.send('[]');
    expect((await c.closed).code).toBe(1008);
  });

  test('double slashes in the path are accepted; other paths are not taken', async () => {
    const ws = await authed('//v0.2//ws/streams/s1');
    expect(opened.at(-1)).toBe('s1');
    expect(ws.isOpen()).toBe(true);
    await ws.close();
    await expect(open('/v0.2/other')).rejects.toThrow();
  });

  test('results arrive in publish order on every socket; an end closes all with 1001 and the reason', async () => {
    const a = await authed();
    const b = await authed();
    for (let i = 0; i < 50; i++) await store.publish(resultsChannel('s1'), result(JSON.stringify({ i })), 's1');
    await Promise.all([a.waitFor(50), b.waitFor(50)]);
    const expected = Array.from({ length: 50 }, (_, i) => JSON.stringify({ i }));
    expect([a.received.map((r) => r.text), b.received.map((r) => r.text)]).toEqual([expected, expected]);
    await store.publish(resultsChannel('s1'), encodeEnvelope({ kind: 'end', reason: 'lease_expired' }), 's1');
    expect(await Promise.all([a.closed, b.closed])).toEqual([
      { code: 1001, reason: 'lease_expired' },
      { code: 1001, reason: 'lease_expired' },
    ]);
  });

  test('a result id delivered already is not delivered again (a tick re-run after a store failover)', async () => {
    const before = opened.length;
    const sock = await openResults(url, 'dup', 'good');
    await deadline(
      until(() => opened.length > before, 5),
      10_000,
      'socket authenticated',
    );
    const withId = (id: string, text: string) => result(JSON.stringify({ id, text }));
    for (const msg of [withId('r-1', 'first'), withId('r-2', 'second'), withId('r-1', 'first, run again'), withId('r-3', 'third')]) {
      await store.publish(resultsChannel('dup'), msg, 'dup');
    }
    // r-3 was published after the repeat: once it is here, the repeat would have been too.
    await sock.waitFor(3);
    expect(sock.received.map((r) => JSON.parse(r.text).id)).toEqual(['r-1', 'r-2', 'r-3']);
    expect(repeated).toBe(1);
    sock.close();
  });

  test('a socket that answers no pings is terminated by the heartbeat', async () => {
    const ws = await authed('/v0.2/ws/streams/hb');
    // Stop the client from answering pings: pause its TCP socket (nothing read, nothing answered).
    (ws.ws as unknown as { _socket: { pause(): void } })._socket.pause();
    // Gone server-side (after two or three heartbeat periods; the bound only turns a hang into a failure).
    await deadline(
      until(() => closedStreams.includes('hb'), 50),
      10_000,
      'the heartbeat terminated the socket',
    );
    ws.ws.terminate();
  });

  test('a slow consumer is shed (bounded memory) while a fast one gets everything', async () => {
    shed = 0;
    const slow = await authed();
    const fast = await authed();
    (slow.ws as unknown as { _socket: { pause(): void } })._socket.pause();
    // 32 MiB in 8 KiB results: far more than loopback's kernel buffers hold for the paused reader.
    const msg = result(JSON.stringify({ pad: 'x'.repeat(8 * 1024) }));
    for (let i = 0; i < 4000; i++) {
      await store.publish(resultsChannel('s1'), msg, 's1');
      if (i % 8 === 0) await sleep(0);
    }
    // Until the fast reader has it all, or (some were shed) a bound: a loaded machine reads late, not less.
    await fast.waitFor(4000).catch(() => undefined);
    expect(shed).toBeGreaterThan(0);
    // The reader keeps up (client and server share this process, so allow for a busy machine).
    expect(fast.received.length).toBeGreaterThanOrEqual(3600);
    slow.ws.terminate();
    fast.ws.close();
  });

  // Last: it closes the server's sockets for good.
  test('shutdown: sockets of the streams it ended close 1001 server_shutdown, the others get the close given (1012)', async () => {
    const [ended, handed] = [await authed('/v0.2/ws/streams/s1'), await authed('/v0.2/ws/streams/hb')];
    await sockets.close(LEGACY_CLOSES.replicaLeaving, new Set(['s1']));
    expect(await deadline(Promise.all([ended.closed, handed.closed]), 10_000, 'both closed')).toEqual([
      { code: 1001, reason: 'server_shutdown' },
      { code: 1012, reason: 'service_restart' },
    ]);
  });
});

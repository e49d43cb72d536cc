/**
 * Every results socket the gateway refuses leaves one info line: the stream, the close code and
 * reason, the client address and, when the client sent one, its key's hash (never the key). On a
 * real HTTP server with the memory store.
 */
import http from 'node:http';
import { logLines } from '../../helpers/log-lines';
import { openResults } from '../../helpers/results-socket';
import { testConfig } from '../../helpers/config';
import { streamRecord } from '../../helpers/stack';
import { deadline, until } from '../../helpers/time';
import { closeServer, listen } from '../../../src/lib/listen';
import { keyHash } from '../../../src/lib/keys';
import { createLogger } from '../../../src/lib/logger';
import { ResultsSockets } from '../../../src/gateway/legacy/http/results-socket';
import { memoryStore } from '../../../src/gateway/store/memory';
import type { Store } from '../../../src/gateway/store/store';

type Line = Record<string, unknown>;

const GOOD = 'svc-refusal-test-good-key-0123456789';
const BAD = 'svc-refusal-test-bad-key-0123456789';
const BUSY = 'svc-refusal-test-busy-key-0123456789';

describe('results-socket refusals in the log', () => {
  const log = logLines();
  let server: http.Server;
  let url: string;
  let store: Store;
  let sockets: ResultsSockets;

  beforeAll(async () => {
    const cfg = testConfig({ legacy: { wsAuthTimeoutMs: 300 } });
    store = memoryStore();
    await store.putRecord(streamRecord('s1'));
    sockets = new ResultsSockets({
      cfg: cfg.legacy,
      logger: createLogger('info', 'gateway', log.sink),
      store,
      authorize: async (key, streamId) => {
        // `gone`: the key is good but the stream is not in the store (ended in between).
        if (key === GOOD) return { ok: true, record: (await store.getRecord(streamId)) ?? streamRecord(streamId) };
        if (key === BUSY) return { ok: false, reason: 'too many failed authentications', code: 1013 };
        return { ok: false, reason: 'authentication failed' };
      },
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

  const refusals = () => log.lines.map((l) => JSON.parse(l) as Line).filter((l) => String(l.msg).startsWith('results socket refused'));
  /** The refusal line of `streamId` with this reason, once written. */
  const refusal = async (streamId: string, reason: string) => {
    let line: Line | undefined;
    await deadline(
      until(() => (line = refusals().find((l) => l.streamId === streamId && l.reason === reason)) !== undefined, 10),
      10_000,
      `the refusal line of ${streamId} (${reason})`,
    );
    return line!;
  };

  test('a wrong key: stream, 1008 and its reason, client address, the key’s hash; never the key', async () => {
    const ws = await openResults(url, 's1', BAD);
    expect(await ws.closed).toEqual({ code: 1008, reason: 'authentication failed' });
    expect(await refusal('s1', 'authentication failed')).toMatchObject({
      level: 30,
      streamId: 's1',
      code: 1008,
      reason: 'authentication failed',
      remoteAddress: '127.0.0.1',
      key: keyHash(BAD),
      msg: 'results socket refused: authentication failed (1008)',
    });
  });

  test('a refusal with its own close code (1013, an address over its failed-auth budget)', async () => {
    const ws = await openResults(url, 's1', BUSY);
    expect((await ws.closed).code).toBe(1013);
    expect(await refusal('s1', 'too many failed authentications')).toMatchObject({ code: 1013, key: keyHash(BUSY) });
  });

  test('no key: a first message that is not {"api_key": …}, or none before the timeout', async () => {
    const bad = await openResults(url, 'no-key', null);
    bad.ws.send('[]');
    expect((await bad.closed).code).toBe(1008);
    const line = await refusal('no-key', 'first message must be {"api_key": "..."}');
    expect(line).toMatchObject({ code: 1008, remoteAddress: '127.0.0.1' });
    expect(line).not.toHaveProperty('key');

    const silent = await openResults(url, 'silent', null);
    expect(await silent.closed).toEqual({ code: 1008, reason: 'authentication timeout' });
    expect(await refusal('silent', 'authentication timeout')).toMatchObject({ code: 1008, remoteAddress: '127.0.0.1' });
  });

  test('a good key for a stream the store no longer has: stream_not_found', async () => {
    const ws = await openResults(url, 'gone', GOOD);
    expect(await ws.closed).toEqual({ code: 1008, reason: 'stream_not_found' });
    expect(await refusal('gone', 'stream_not_found')).toMatchObject({ code: 1008, key: keyHash(GOOD) });
  });

  test('a malformed stream id in the path: the 400, the path and the address', async () => {
    await expect(openResults(url, 'x', null, { path: '/v0.2/ws/streams/%E0%A4%A' })).rejects.toThrow();
    await deadline(
      until(() => refusals().some((l) => l.status === 400)),
      10_000,
      'the 400 refusal line',
    );
    expect(refusals().find((l) => l.status === 400)).toMatchObject({ url: '/v0.2/ws/streams/%E0%A4%A', remoteAddress: '127.0.0.1' });
  });

  test('no line holds a key', () => {
    const all = log.lines.join('\n');
    for (const key of [GOOD, BAD, BUSY]) expect(all).not.toContain(key);
  });
});

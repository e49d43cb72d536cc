/** A malformed results-socket path must be refused, never crash the gateway. */
import net from 'node:net';
import { http, startStack } from '../../helpers/stack';
import type { Stack } from '../../helpers/stack';

describe('results socket upgrade with a malformed path', () => {
  let s: Stack;
  beforeAll(async () => {
    s = await startStack();
  });
  afterAll(() => s.close());

  test('a bad percent-escape gets 400 and the gateway keeps serving', async () => {
    const { port } = new URL(s.url);
    const answer = await new Promise<string>((resolve, reject) => {
      const sock = net.connect(Number(port), '127.0.0.1', () => {
        sock.write(
          'GET /v0.2/ws/streams/%E0%A4%A HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
            'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n',
        );
      });
      let buf = '';
      sock.on('data', (d) => (buf += d.toString()));
      sock.on('end', () => resolve(buf));
      sock.on('error', reject);
    });
    expect(answer).toMatch(/^HTTP\/1\.1 400/);
    expect((await http(s.url, 'GET', '/v0.2/models', { key: null })).status).toBe(200);
  });
});

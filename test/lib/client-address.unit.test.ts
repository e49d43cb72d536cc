/**
 * `server.trustProxy` / `TRUST_PROXY` parsing and the client address it derives, with Express's
 * `trust proxy` semantics: an `X-Forwarded-For` counts only as far as it arrived through trusted hops.
 */
import type { IncomingMessage } from 'node:http';
import { loadConfig } from '../../src/config';
import { clientAddresses, compileTrust, parseTrustProxy } from '../../src/lib/client-address';
import type { TrustProxy } from '../../src/lib/client-address';

/** A request as node:http builds it: the peer on the socket, headers in the raw list. */
const req = (peer: string | undefined, ...xff: string[]) =>
  ({
    socket: { remoteAddress: peer },
    rawHeaders: ['Host', 'gw', ...xff.flatMap((v) => ['X-Forwarded-For', v])],
  }) as unknown as IncomingMessage;
const addressOf = (setting: TrustProxy, r: IncomingMessage) => clientAddresses(compileTrust(setting))(r);

describe('parseTrustProxy', () => {
  test.each<[unknown, TrustProxy]>([
    ['false', false],
    ['', false],
    ['0', false],
    [0, false],
    [false, false],
    [[], false],
    ['1', 1],
    [2, 2],
    ['loopback', ['loopback']],
    ['10.0.0.0/8, 127.0.0.1 ,', ['10.0.0.0/8', '127.0.0.1']],
    [
      ['uniquelocal', 'fd00::/8'],
      ['uniquelocal', 'fd00::/8'],
    ],
  ])('%j → %j', (given, want) => expect(parseTrustProxy(given)).toEqual(want));

  test.each([
    [true, /`true` would trust every hop/],
    ['true', /`true` would trust every hop/],
    [-1, /whole number of 0 or more/],
    [1.5, /whole number of 0 or more/],
    ['10.0.0.300', /invalid IP address: 10\.0\.0\.300/],
    ['10.0.0.0/33', /invalid range on address: 10\.0\.0\.0\/33/],
    ['loopbak', /invalid IP address: loopbak.*loopback \/ linklocal \/ uniquelocal/],
  ])('%j is refused', (given, message) => expect(() => parseTrustProxy(given)).toThrow(message));

  test('config: server.trustProxy and TRUST_PROXY, unset by default, a bad value named at boot', () => {
    expect(loadConfig({ env: {} }).server.trustProxy).toBeUndefined();
    expect(loadConfig({ env: { TRUST_PROXY: '1' } }).server.trustProxy).toBe(1);
    expect(loadConfig({ env: { TRUST_PROXY: 'loopback,10.0.0.0/8' } }).server.trustProxy).toEqual(['loopback', '10.0.0.0/8']);
    expect(loadConfig({ env: { TRUST_PROXY: 'false' } }).server.trustProxy).toBe(false);
    expect(loadConfig({ env: {}, overrides: { server: { trustProxy: ['127.0.0.1'] } } }).server.trustProxy).toEqual(['127.0.0.1']);
    expect(() => loadConfig({ env: { TRUST_PROXY: 'true' } })).toThrow(/server\.trustProxy: `true` would trust every hop/);
    expect(() => loadConfig({ env: { TRUST_PROXY: 'balancer.internal' } })).toThrow(
      /server\.trustProxy: invalid IP address: balancer\.internal/,
    );
  });
});

describe('clientAddresses', () => {
  test('off: the socket peer, whatever X-Forwarded-For says', () => {
    expect(addressOf(false, req('10.0.0.5', '1.2.3.4'))).toBe('10.0.0.5');
    expect(addressOf(false, req(undefined))).toBe('unknown');
  });

  test('a hop count: that many proxies believed, counted from the gateway', () => {
    // The client sent "6.6.6.6" itself; the balancer (10.0.0.5) appended the client's real 1.2.3.4.
    const r = () => req('10.0.0.5', '6.6.6.6, 1.2.3.4');
    expect(addressOf(1, r())).toBe('1.2.3.4');
    expect(addressOf(2, r())).toBe('6.6.6.6');
    expect(addressOf(1, req('10.0.0.5'))).toBe('10.0.0.5');
  });

  test('addresses and named ranges: hops believed only while they come from a trusted address', () => {
    expect(addressOf(['10.0.0.0/8'], req('10.0.0.5', '6.6.6.6, 1.2.3.4'))).toBe('1.2.3.4');
    // Two trusted hops (an edge balancer 10.0.0.9 in front of an internal one 10.0.0.5).
    expect(addressOf(['10.0.0.0/8'], req('10.0.0.5', '1.2.3.4, 10.0.0.9'))).toBe('1.2.3.4');
    // A peer outside the list: its X-Forwarded-For is ignored (no spoofing from the outside).
    expect(addressOf(['10.0.0.0/8'], req('203.0.113.7', '1.2.3.4'))).toBe('203.0.113.7');
    expect(addressOf(['loopback'], req('127.0.0.1', '1.2.3.4'))).toBe('1.2.3.4');
    expect(addressOf(['loopback'], req('::ffff:127.0.0.1', '1.2.3.4'))).toBe('1.2.3.4');
    expect(addressOf(['uniquelocal'], req('127.0.0.1', '1.2.3.4'))).toBe('127.0.0.1');
  });

  test('repeated X-Forwarded-For headers are one list, as Node joins them', () => {
    expect(addressOf(2, req('10.0.0.5', '6.6.6.6', '1.2.3.4'))).toBe('6.6.6.6');
    expect(addressOf(1, req('10.0.0.5', '6.6.6.6', '1.2.3.4'))).toBe('1.2.3.4');
  });

  test('derived once per request', () => {
    const r = req('10.0.0.5', '1.2.3.4');
    const of = clientAddresses(compileTrust(1));
    expect(of(r)).toBe('1.2.3.4');
    (r.rawHeaders as string[])[3] = '9.9.9.9';
    expect(of(r)).toBe('1.2.3.4');
  });
});

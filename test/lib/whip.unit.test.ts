import { WhipError, parseIceServerLinks, whipEndpoint } from '../../src/lib/whip';

describe('whipEndpoint', () => {
  test.each([
    ['wss://project.livekit.cloud', 'https://project.livekit.cloud/whip/v1'],
    ['ws://127.0.0.1:8081', 'http://127.0.0.1:8081/whip/v1'],
    ['wss://rooms.example/region/a/', 'https://rooms.example/region/a/whip/v1'],
    ['https://rooms.example?x=1#y', 'https://rooms.example/whip/v1'],
  ])('%s → %s', (room, endpoint) => {
    expect(whipEndpoint(room)).toBe(endpoint);
  });

  test('a URL that is no room URL throws', () => {
    expect(() => whipEndpoint('ftp://x')).toThrow(/not a room URL/);
    expect(() => whipEndpoint('not a url')).toThrow();
  });
});

describe('parseIceServerLinks', () => {
  test('one server per ice-server link, across joined and separate header values; other rels ignored', () => {
    const joined =
      '<turn:turn.example:3478%3Ftransport=udp>; rel="ice-server"; username="u, 1"; credential="p;\\"2"; credential-type="password", ' +
      '<https://example/doc>; rel="help", <stun:stun.example:3478>; rel=ice-server';
    expect(parseIceServerLinks([joined, '<turns:t.example:5349>; rel="ice-server"; username=x; credential=y'])).toEqual([
      { urls: 'turn:turn.example:3478?transport=udp', username: 'u, 1', credential: 'p;"2' },
      { urls: 'stun:stun.example:3478' },
      { urls: 'turns:t.example:5349', username: 'x', credential: 'y' },
    ]);
  });

  test('garbage yields nothing, never a throw', () => {
    expect(parseIceServerLinks(['', 'nonsense', '<unclosed; rel="ice-server"', '<%E0%A4%A>; rel="ice-server"'])).toEqual([
      { urls: '%E0%A4%A' },
    ]);
  });
});

test('WhipError says what failed, the status and what the room said', () => {
  const e = new WhipError('refused', 400, 'malformed SDP offer');
  expect(e.message).toBe('WHIP refused (400): malformed SDP offer');
  expect(new WhipError('timeout', null, 'no answer within 10 ms').message).toBe('WHIP timeout: no answer within 10 ms');
});

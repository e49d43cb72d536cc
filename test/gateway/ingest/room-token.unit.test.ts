import { AccessToken } from 'livekit-server-sdk';
import { checkRoomToken, roomUrlProblem } from '../../../src/gateway/ingest/room-token';
import { sourceProblem } from '../../../src/gateway/ingest/checks';
import type { StreamSpec } from '../../../src/gateway/legacy/contract/spec';

const NOW = Date.UTC(2026, 0, 1);
const b64 = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');
const jwt = (claims: Record<string, unknown>, header: Record<string, unknown> = { alg: 'HS256', typ: 'JWT' }) =>
  `${b64(header)}.${b64(claims)}.c2ln`;
const exp = (secondsFromNow: number) => Math.floor(NOW / 1000) + secondsFromNow;

describe('checkRoomToken', () => {
  test('accepts a LiveKit subscribe token (absent canSubscribe means allowed, as in LiveKit)', async () => {
    const at = new AccessToken('key', 'secret-secret-secret-secret-secret', { identity: 'gw', ttl: 60 });
    at.addGrant({ room: 'cam-1', roomJoin: true, canSubscribe: true });
    const real = checkRoomToken(await at.toJwt(), Date.now());
    expect(real).toMatchObject({ ok: true, grant: { room: 'cam-1', identity: 'gw' } });
    expect(checkRoomToken(jwt({ sub: 'gw', exp: exp(60), video: { room: 'r', roomJoin: true } }), NOW)).toMatchObject({ ok: true });
    expect(checkRoomToken(jwt({ sub: 'gw', video: { room: 'r', roomJoin: true } }), NOW)).toMatchObject({
      ok: true,
      grant: { exp: undefined },
    });
  });

  test.each([
    ['abc', /not a JWT/],
    ['a.b', /not a JWT/],
    ['!!.??.x', /not a JWT/],
    [jwt({ sub: 'g', exp: exp(60), video: { room: 'r', roomJoin: true } }, { alg: 'none' }), /not a signed JWT/],
    [`${b64({ alg: 'HS256' })}.${b64([1, 2])}.x`, /claims are not an object/],
    [jwt({ sub: 'g', exp: exp(-1), video: { room: 'r', roomJoin: true } }), /expired/],
    [jwt({ sub: 'g', exp: exp(3), video: { room: 'r', roomJoin: true } }), /expired/], // not valid long enough to join
    [jwt({ sub: 'g', exp: 'soon', video: { room: 'r', roomJoin: true } }), /exp is not a number/],
    [jwt({ sub: 'g', exp: exp(60) }), /roomJoin/],
    [jwt({ sub: 'g', exp: exp(60), video: { roomJoin: true } }), /names no room/],
    [jwt({ sub: 'g', exp: exp(60), video: { room: 'r', roomJoin: true, canSubscribe: false, canPublish: true } }), /canSubscribe is false/],
    [jwt({ exp: exp(60), video: { room: 'r', roomJoin: true } }), /no participant identity/],
  ])('refuses %s', (token, problem) => {
    const r = checkRoomToken(token, NOW, 5000);
    expect(r.ok).toBe(false);
    expect(!r.ok && r.problem).toMatch(problem);
  });
});

test('roomUrlProblem', () => {
  expect(roomUrlProblem('wss://rooms.example.com')).toBeNull();
  expect(roomUrlProblem('http://127.0.0.1:7880')).toBeNull();
  expect(roomUrlProblem('ftp://x')).toMatch(/ws:\/\//);
  expect(roomUrlProblem('not a url')).toMatch(/not a valid URL/);
});

describe('sourceProblem → legacy 422s', () => {
  const base = { mode: 'frame', frame: { intervalMs: 500 }, deprecatedFields: [], requestId: 'req-1' } as unknown as StreamSpec;
  const spec = (over: Partial<StreamSpec>) => ({ ...base, ...over }) as StreamSpec;

  test('native and good sources pass', () => {
    expect(sourceProblem(spec({ transport: 'native', source: { transport: 'native' } }))).toBeNull();
    const token = jwt({ sub: 'g', exp: Math.floor(Date.now() / 1000) + 60, video: { room: 'r', roomJoin: true } });
    expect(sourceProblem(spec({ transport: 'room', source: { transport: 'room', url: 'wss://x', token } }))).toBeNull();
  });

  test('an undecodable offer names the field the client used', () => {
    const h264 = 'v=0\r\nm=video 9 UDP/TLS/RTP/SAVPF 102\r\na=sendonly\r\na=rtpmap:102 H264/90000\r\n';
    const viaSource = sourceProblem(spec({ transport: 'webrtc', source: { transport: 'webrtc', sdp: h264 } }))!;
    expect(viaSource.status).toBe(422);
    expect(viaSource.toLegacyBody('x')).toMatchObject({
      error: 'validation_error',
      details: [{ loc: ['body', 'source', 'sdp'], type: 'value_error' }],
    });
    expect(viaSource.options.extra?.request_id).toBe('req-1'); // the client's request id travels with it
    const viaDeprecated = sourceProblem(
      spec({ transport: 'webrtc', source: { transport: 'webrtc', sdp: h264 }, deprecatedFields: ['webrtc'] }),
    )!;
    expect(viaDeprecated.toLegacyBody('x')).toMatchObject({ details: [{ loc: ['body', 'webrtc', 'sdp'] }] });
  });

  test('room url and token problems point at their fields', () => {
    const bad = sourceProblem(spec({ transport: 'room', source: { transport: 'room', url: 'wss://x', token: 'nope' } }))!;
    expect(bad.toLegacyBody('x')).toMatchObject({
      message: expect.stringMatching(/not a JWT/),
      details: [{ loc: ['body', 'source', 'token'] }],
    });
    const url = sourceProblem(spec({ transport: 'room', source: { transport: 'room', url: 'mailto:a@b', token: 'nope' } }))!;
    expect(url.toLegacyBody('x')).toMatchObject({ details: [{ loc: ['body', 'source', 'url'] }] });
  });
});

/**
 * @jest-environment ./test/media-environment.js
 *
 * WHIP publishing into the emulator's room (`/whip/v1`, as LiveKit 1.9+ serves it), on real
 * sockets: a wrtc publisher that never trickles posts its offer, connects with the answer's
 * candidates, and its frames reach the room's sink; DELETE ends it; a peer that goes away leaves
 * after the (shortened) disconnected → failed → clean-up timeline; every refusal is the status and
 * `{"error": …}` body LiveKit answers.
 */
import { mintPublishToken, mintSubscribeToken } from '../../../src/emulator/room';
import { parseIceServerLinks } from '../../../src/lib/whip';
import { syntheticOffer } from '../../../src/lib/sdp';
import { startWebrtcSender } from '../../helpers/wrtc-sender';
import type { WebrtcSender } from '../../helpers/wrtc-sender';
import { deadline, until } from '../../helpers/time';
import { TEST_KEYS, meanLuma, signRoomJwt, startRoomHarness } from './harness';
import type { RoomHarness } from './harness';

const TIMING = { gatherTimeoutMs: 2000, connectTimeoutMs: 1500, disconnectedAfterMs: 400, failedAfterMs: 200, cleanupMs: 200 };
const ICE = [{ urls: ['turn:turn.example:3478?transport=udp', 'turns:turn.example:5349'], username: 'u1', credential: 'c "1"' }];

let h: RoomHarness;
const senders: WebrtcSender[] = [];

beforeAll(async () => {
  h = await startRoomHarness({ whip: { timing: TIMING, iceServers: ICE } });
});

afterAll(async () => {
  for (const s of senders) s.close();
  await h?.close();
});

const publishToken = (room: string, identity = `pub-${room}`) => mintPublishToken(TEST_KEYS, room, identity, 60);

async function post(body: string, opts: { token?: string; type?: string } = {}) {
  const headers: Record<string, string> = { 'content-type': opts.type ?? 'application/sdp' };
  if (opts.token) headers.authorization = `Bearer ${opts.token}`;
  const res = await fetch(`${h.httpUrl}/whip/v1`, { method: 'POST', headers, body });
  return { res, text: await res.text() };
}

async function sender(): Promise<WebrtcSender> {
  const s = await startWebrtcSender({ width: 160, height: 120, fps: 10 });
  senders.push(s);
  return s;
}

test('a publisher that never trickles: 201 with every server candidate, Location, ETag, Link; its frames reach the room; DELETE ends it', async () => {
  const frames = h.openRoom('room-a');
  const s = await sender();
  const token = await publishToken('room-a');
  const { res, text } = await post(s.offer, { token });
  expect(res.status).toBe(201);
  expect(res.headers.get('content-type')).toBe('application/sdp');
  expect(res.headers.get('access-control-allow-origin')).toBe('*');
  const location = res.headers.get('location')!;
  expect(location).toMatch(/^\/whip\/v1\/PA_\w+$/);
  expect(res.headers.get('etag')).toBe(/^a=ice-ufrag:(\S+)/m.exec(text)![1]);
  expect(text).toMatch(/^a=candidate:.* typ host/m);
  // One Link per URL; LiveKit path-escapes the URL, and the quoted credential survives.
  expect(parseIceServerLinks([res.headers.get('link')!])).toEqual([
    { urls: 'turn:turn.example:3478?transport=udp', username: 'u1', credential: 'c "1"' },
    { urls: 'turns:turn.example:5349', username: 'u1', credential: 'c "1"' },
  ]);

  await s.answer(text);
  await frames.until(() => frames.count >= 5, 15_000, 'WHIP frames');
  expect(meanLuma(frames.last!)).toBeGreaterThan(10);
  // The track is named from the offer's msid (its track id).
  const trackId = /^a=msid:\S+ (\S+)/m.exec(s.offer)![1];
  expect(h.server.stats('room-a')).toMatchObject({ publishers: 1, publication: { identity: 'pub-room-a', trackName: trackId } });
  expect(h.server.whipSessionCount).toBe(1);

  // DELETE needs the same room and identity: another publisher's token finds nothing there.
  const other = await fetch(`${h.httpUrl}${location}`, {
    method: 'DELETE',
    headers: { authorization: `Bearer ${await publishToken('room-a', 'x')}` },
  });
  expect(other.status).toBe(404);
  const del = await fetch(`${h.httpUrl}${location}`, { method: 'DELETE', headers: { authorization: `Bearer ${token}` } });
  expect(del.status).toBe(200);
  expect(h.server.stats('room-a')).toMatchObject({ publishers: 0, publication: null });
  expect(h.server.whipSessionCount).toBe(0);
  const again = await fetch(`${h.httpUrl}${location}`, { method: 'DELETE', headers: { authorization: `Bearer ${token}` } });
  expect(again.status).toBe(404);
  expect(await again.json()).toEqual({ error: 'participant not found' });
}, 30_000);

test('a peer that goes away leaves on its own: disconnected, failed, cleaned up; the room stays', async () => {
  const frames = h.openRoom('room-b');
  const s = await sender();
  const { res, text } = await post(s.offer, { token: await publishToken('room-b') });
  expect(res.status).toBe(201);
  await s.answer(text);
  await frames.until(() => frames.count >= 3, 15_000, 'WHIP frames');
  s.close();
  await deadline(
    until(() => h.server.whipSessionCount === 0),
    20_000,
    'the silent publisher to leave',
  );
  expect(h.server.stats('room-b')).toMatchObject({ publishers: 0, publication: null });
}, 30_000);

test('an offer that never connects is answered, then leaves after the connect timeout; the same identity replaces its earlier session', async () => {
  h.openRoom('room-c');
  const token = await publishToken('room-c');
  const first = await post(syntheticOffer(), { token });
  expect(first.res.status).toBe(201);
  const second = await post(syntheticOffer(), { token });
  expect(second.res.status).toBe(201);
  // The first session was replaced (LiveKit's duplicate identity): its resource is gone.
  const del = await fetch(`${h.httpUrl}${first.res.headers.get('location')}`, {
    method: 'DELETE',
    headers: { authorization: `Bearer ${token}` },
  });
  expect(del.status).toBe(404);
  expect(h.server.whipSessionCount).toBe(1);
  await deadline(
    until(() => h.server.whipSessionCount === 0),
    10_000,
    'the unconnected publisher to leave',
  );
}, 20_000);

test('refusals: content type, token, grants, room, SDP, codecs, size, faults', async () => {
  h.openRoom('room-d');
  const token = await publishToken('room-d');
  const offer = syntheticOffer();
  const error = async (p: Promise<{ res: Response; text: string }>) => {
    const { res, text } = await p;
    return { status: res.status, type: res.headers.get('content-type'), text };
  };

  expect(await error(post(offer, { token, type: 'text/plain' }))).toMatchObject({
    status: 400,
    text: '{"error":"unsupported content-type: text/plain"}',
  });
  // LiveKit compares the header exactly: a charset parameter is refused too.
  expect((await error(post(offer, { token, type: 'application/sdp; charset=utf-8' }))).status).toBe(400);
  expect(await error(post(offer))).toMatchObject({ status: 401, text: '{"error":"permissions denied"}' });
  const forged = await error(
    post(offer, {
      token: signRoomJwt(
        { apiKey: TEST_KEYS.apiKey, apiSecret: 'another-secret-that-is-long-enough-0000' },
        { sub: 'p', video: { room: 'room-d', roomJoin: true } },
      ),
    }),
  );
  expect(forged).toMatchObject({ status: 401, type: expect.stringMatching(/^text\/plain/) });
  expect(forged.text).toMatch(/^invalid token/);
  const viewer = await mintSubscribeToken(TEST_KEYS, 'room-d', 'viewer', 60);
  expect(await error(post(offer, { token: viewer }))).toMatchObject({ status: 401, text: '{"error":"token does not grant canPublish"}' });
  expect(await error(post(offer, { token: await publishToken('no-such-room') }))).toMatchObject({
    status: 404,
    text: '{"error":"requested room does not exist"}',
  });
  expect(await error(post('', { token }))).toMatchObject({ status: 400, text: '{"error":"body does not have SDP offer"}' });
  expect((await error(post('hello', { token }))).text).toMatch(/malformed SDP offer/);
  // Parsed as SDP, refused by libwebrtc: the room's parser's own words.
  const broken = await error(post(offer.replace(/^a=fingerprint:.*\r\n/m, '').replace(/^a=setup:.*\r\n/m, ''), { token }));
  expect(broken.status).toBe(400);
  expect(broken.text).toMatch(/malformed SDP offer: /);
  const h264 = await error(post(offer.replace('VP8/90000', 'H264/90000'), { token }));
  expect(h264).toMatchObject({ status: 400, type: 'application/sdp' });
  expect(JSON.parse(h264.text).error).toBe("the offer's video codecs (H264) cannot be decoded by this room; offer VP8, VP9 or AV1");
  expect((await error(post(`${offer}a=x:${'y'.repeat(200 * 1024)}\r\n`, { token }))).status).toBe(413);

  await fetch(`${h.httpUrl}/whip/v1`, { method: 'OPTIONS' }).then((r) => {
    expect(r.status).toBe(200);
    expect(r.headers.get('access-control-allow-methods')).toBe('PATCH, OPTIONS, GET, POST, DELETE');
  });
  expect((await fetch(`${h.httpUrl}/whip/v1`)).status).toBe(204);
  expect(h.server.whipSessionCount).toBe(0);
});

test('PATCH trickles with the ETag, 428 without one, 405 for an ICE restart', async () => {
  h.openRoom('room-e');
  const token = await publishToken('room-e');
  const { res } = await post(syntheticOffer(), { token });
  const url = `${h.httpUrl}${res.headers.get('location')}`;
  const etag = res.headers.get('etag')!;
  const patch = (headers: Record<string, string>, body = 'a=mid:0\r\na=candidate:1 1 udp 2122260223 127.0.0.1 9 typ host\r\n') =>
    fetch(url, {
      method: 'PATCH',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/trickle-ice-sdpfrag', ...headers },
      body,
    });
  expect((await patch({})).status).toBe(428);
  expect((await patch({ 'if-match': 'nope' })).status).toBe(400);
  expect((await patch({ 'if-match': '*' })).status).toBe(405);
  expect((await patch({ 'if-match': etag, 'content-type': 'application/sdp' })).status).toBe(400);
  expect((await patch({ 'if-match': etag })).status).toBe(204);
  expect((await fetch(url, { method: 'DELETE', headers: { authorization: `Bearer ${token}` } })).status).toBe(200);
});

test('an armed fault answers the next POST; a room without WHIP answers 404', async () => {
  const faults = [{ count: 1, model: 'whip', status: 503, message: 'node unavailable' }];
  const faulty = await startRoomHarness({ whip: { takeFault: () => faults.shift() } });
  const off = await startRoomHarness({ whip: { enabled: false } });
  try {
    faulty.openRoom('r');
    const token = await publishToken('r');
    const send = (base: string) =>
      fetch(`${base}/whip/v1`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/sdp' },
        body: syntheticOffer(),
      });
    const failed = await send(faulty.httpUrl);
    expect(failed.status).toBe(503);
    expect(await failed.json()).toEqual({ error: 'node unavailable' });
    const next = await send(faulty.httpUrl);
    expect(next.status).toBe(201);
    expect((await send(off.httpUrl)).status).toBe(404);
  } finally {
    await faulty.close();
    await off.close();
  }
});

/**
 * @jest-environment ./test/media-environment.js
 *
 * Legacy webrtc streams over WHIP, on real sockets: a wrtc client (this process) offers without
 * trickling; the gateway publishes the offer into the upstream stream's room (the emulator's WHIP
 * endpoint) and answers with the room's answer; the client's frames reach the upstream with no
 * media in the gateway. The record keeps the session (any replica can end it); the stream ends
 * `webrtc_disconnected` when its frames stop upstream; every refusal of the room is a clean legacy
 * error that leaves no slot and no upstream stream behind.
 */
import { keyHash } from '../../../src/lib/keys';
import { syntheticOffer } from '../../../src/lib/sdp';
import { openResults } from '../../helpers/results-socket';
import { KEY, clipBody, frameBody, http, startStack, tail } from '../../helpers/stack';
import type { Stack } from '../../helpers/stack';
import { slotsInUse } from '../../helpers/store-ops';
import { deadline, sleep } from '../../helpers/time';
import { startWebrtcSender } from '../../helpers/wrtc-sender';
import type { WebrtcSender } from '../../helpers/wrtc-sender';

const ICE = [{ urls: ['turn:turn.example:3478?transport=udp'], username: 'user', credential: 'secret' }];

let stack: Stack;
const senders: WebrtcSender[] = [];

beforeAll(async () => {
  stack = await startStack({
    emulator: { autoPublish: { enabled: false }, room: { whip: { iceServers: ICE } } },
    legacy: { webrtc: { frameCheckMs: 250, framesLostMs: 2000, firstFrameTimeoutMs: 4000, answerTimeoutMs: 1500 } },
  });
});

afterAll(async () => {
  for (const s of senders) s.close();
  await stack?.close();
});

async function sender(): Promise<WebrtcSender> {
  const s = await startWebrtcSender({ width: 160, height: 120, fps: 10 });
  senders.push(s);
  return s;
}

const activeUpstream = async () =>
  ((await http(stack.emulator.url, 'GET', '/_emulator/state')).body as { streams: { id: string }[] }).streams.map((s) => s.id);
const room = () => stack.emulator.emulator.room;
/** WHIP publishers in a stream's room now (0 once the room is gone). */
const publishersOf = (id: string) => room().stats(id)?.publishers ?? 0;
const jwtExp = (token: string) => (JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString()) as { exp: number }).exp;

test('create publishes the offer into the room: its answer and Link servers come back; frames reach the upstream; DELETE ends the WHIP session', async () => {
  const s = await sender();
  const created = await http(stack.url, 'POST', '/v0.2/streams', { body: { ...frameBody(), source: { type: 'webrtc', sdp: s.offer } } });
  expect(created.status).toBe(201);
  const body = created.body as { stream_id: string; webrtc: { type: string; sdp: string }; turn_servers: unknown; room: unknown };
  expect(body.webrtc.type).toBe('answer');
  expect(body.webrtc.sdp).toMatch(/^a=candidate:.* typ host/m);
  expect(body.turn_servers).toEqual([{ urls: 'turn:turn.example:3478?transport=udp', username: 'user', credential: 'secret' }]);
  expect(body.room).toBeNull();
  const id = body.stream_id;
  // The record: movable (not pinned), with the session's resource; this one process keeps the token as is.
  const rec = (await stack.gateway.gateway.store.getRecord(id))!;
  expect(rec.pinned).toBe(false);
  expect(rec.mediaSession).toEqual({
    kind: 'whip',
    resource: expect.stringMatching(/^http:\/\/127\.0\.0\.1:\d+\/whip\/v1\/PA_\w+$/),
    token: expect.any(String),
  });
  expect(room().whipSessionCount).toBeGreaterThanOrEqual(1);

  await s.answer(body.webrtc.sdp);
  const socket = await openResults(stack.url, id, KEY);
  const results = await socket.waitFor(2, 15_000);
  for (const r of results) expect(tail(r.result as string).frames).toBeGreaterThan(0);
  expect(room().stats(id)).toMatchObject({ publishers: 1, publication: { identity: expect.stringContaining(id) } });

  // A keepalive's fresh publish token goes into the record, for whichever replica ends the stream
  // (tokens are minted to the second: one a second later expires later).
  await sleep(1100);
  const ka = await http(stack.url, 'POST', `/v0.2/streams/${id}/keepalive`);
  expect(ka.status).toBe(200);
  const after = (await stack.gateway.gateway.store.getRecord(id))!;
  expect(jwtExp(after.mediaSession!.token)).toBeGreaterThan(jwtExp(rec.mediaSession!.token));

  const sessions = room().whipSessionCount;
  expect((await http(stack.url, 'DELETE', `/v0.2/streams/${id}`)).status).toBe(200);
  expect(room().whipSessionCount).toBe(sessions - 1);
  expect(await socket.closed).toEqual({ code: 1001, reason: 'client_requested' });
  expect(await activeUpstream()).not.toContain(id);
}, 60_000);

test('the client going away ends the stream webrtc_disconnected once its frames stop upstream', async () => {
  const s = await sender();
  const created = await http(stack.url, 'POST', '/v0.2/streams', {
    body: { ...clipBody({ target_fps: 2, clip_length_seconds: 1, delay_seconds: 0.5 }), source: { type: 'webrtc', sdp: s.offer } },
  });
  expect(created.status).toBe(201);
  const { stream_id: id, webrtc } = created.body as { stream_id: string; webrtc: { sdp: string } };
  await s.answer(webrtc.sdp);
  const socket = await openResults(stack.url, id, KEY);
  await socket.waitFor(1, 15_000);
  s.close();
  expect(await deadline(socket.closed, 20_000, 'the stream ends')).toEqual({ code: 1001, reason: 'webrtc_disconnected' });
  expect(publishersOf(id)).toBe(0);
  expect(await activeUpstream()).not.toContain(id);
  expect(await slotsInUse(stack.gateway.gateway.store, keyHash(KEY))).toBe(0);
}, 60_000);

test('a client that never connects ends webrtc_disconnected after the first-frame bound', async () => {
  const created = await http(stack.url, 'POST', '/v0.2/streams', {
    body: { ...frameBody(), source: { type: 'webrtc', sdp: syntheticOffer() } },
  });
  expect(created.status).toBe(201);
  const id = (created.body as { stream_id: string }).stream_id;
  const socket = await openResults(stack.url, id, KEY);
  expect(await deadline(socket.closed, 20_000, 'the stream ends')).toEqual({ code: 1001, reason: 'webrtc_disconnected' });
  expect(await slotsInUse(stack.gateway.gateway.store, keyHash(KEY))).toBe(0);
}, 30_000);

describe("the room's refusals: a clean legacy error, no slot or upstream stream left", () => {
  const create = (sdp: string, deprecatedField = false) =>
    http(stack.url, 'POST', '/v0.2/streams', {
      body: deprecatedField
        ? { ...clipBody(), mode: undefined, webrtc: { type: 'offer', sdp } }
        : { ...clipBody(), source: { type: 'webrtc', sdp } },
    });
  const arm = (fault: Record<string, unknown>) => http(stack.emulator.url, 'POST', '/_emulator/whip/faults', { body: fault });
  let before: string[];
  let sessions: number;
  beforeEach(async () => {
    before = await activeUpstream();
    sessions = room().whipSessionCount;
  });
  afterEach(async () => {
    await http(stack.emulator.url, 'DELETE', '/_emulator/whip/faults');
    expect((await activeUpstream()).filter((id) => !before.includes(id))).toEqual([]);
    expect(room().whipSessionCount).toBe(sessions);
    expect(await slotsInUse(stack.gateway.gateway.store, keyHash(KEY))).toBe(0);
  });

  test('an offer the room cannot parse: 422 at the offer, in the room’s words', async () => {
    const broken = syntheticOffer()
      .replace(/^a=fingerprint:.*\r\n/m, '')
      .replace(/^a=setup:.*\r\n/m, '');
    const r = await create(broken);
    expect(r.status).toBe(422);
    expect(r.body).toMatchObject({ error: 'validation_error', details: [{ loc: ['body', 'source', 'sdp'], type: 'value_error' }] });
    expect((r.body as { message: string }).message).toMatch(/^the service's media room refused the offer: malformed SDP offer: /);
  });

  test('video the room cannot decode (H264 only): the room says which codecs it takes; the gateway filters nothing', async () => {
    const r = await create(syntheticOffer().replace('VP8/90000', 'H264/90000'), true);
    expect(r.status).toBe(422);
    expect(r.body).toMatchObject({
      message:
        "the service's media room refused the offer: the offer's video codecs (H264) cannot be decoded by this room; offer VP8, VP9 or AV1",
      details: [{ loc: ['body', 'webrtc', 'sdp'] }],
    });
  });

  test('an offer that is no SDP, or sends no video, is refused before anything is created', async () => {
    const r = await create('hello');
    expect(r).toMatchObject({ status: 422, body: { details: [{ loc: ['body', 'source', 'sdp'], msg: 'sdp is not an SDP offer' }] } });
    const recvonly = await create(syntheticOffer().replace('a=sendonly', 'a=recvonly'));
    expect((recvonly.body as { message: string }).message).toMatch(/sends no video/);
  });

  test.each([
    [{ status: 401, message: 'invalid token' }, 502, 'upstream_error', /could not take the stream's media \(401\)/],
    [{ status: 503, message: 'no media node' }, 502, 'upstream_error', /could not take the stream's media \(503\)/],
    [{ latencyMs: 3000 }, 504, 'upstream_timeout', /did not answer the offer in time/],
    [{ reset: true }, 502, 'upstream_unreachable', /could not be reached/],
  ])('the room answers %j: %i %s', async (fault, status, code, message) => {
    await arm(fault);
    const r = await create(syntheticOffer());
    expect(r.status).toBe(status);
    expect(r.body).toMatchObject({ error: code, message: expect.stringMatching(message) });
    // The room's own words (which may name its hosts) stay in the log.
    expect(JSON.stringify(r.body)).not.toMatch(/invalid token|no media node/);
  });
});

test('a room without WHIP: 502 whip_unsupported naming the setting; nothing left behind', async () => {
  const bare = await startStack({ emulator: { autoPublish: { enabled: false }, room: { whip: { enabled: false } } } });
  try {
    const r = await http(bare.url, 'POST', '/v0.2/streams', {
      body: { ...frameBody(), source: { type: 'webrtc', sdp: syntheticOffer() } },
    });
    expect(r.status).toBe(502);
    expect(r.body).toMatchObject({ error: 'whip_unsupported', message: expect.stringContaining('legacy.webrtc.mode "relay"') });
    const state = (await http(bare.emulator.url, 'GET', '/_emulator/state')).body as { streams: unknown[] };
    expect(state.streams).toEqual([]);
    expect(await slotsInUse(bare.gateway.gateway.store, keyHash(KEY))).toBe(0);
  } finally {
    await bare.close();
  }
});

/**
 * @jest-environment ./test/media-environment.js
 *
 * The room's signalling at protocol level: a bare ws + protobuf client against the real server.
 */
import {
  DisconnectReason,
  LeaveRequest_Action,
  RequestResponse_Reason,
  SignalTarget,
  TrackSource,
  TrackType,
  protoInt64,
} from '@livekit/protocol';
import { RTCPeerConnection } from '@roamhq/wrtc';
import { mintPublishToken, mintSubscribeToken } from '../../../src/emulator/room';
import { TEST_KEYS, signRoomJwt, startRoomHarness } from './harness';
import type { RoomHarness } from './harness';
import { RawClient, joinRequestParam } from './raw-client';
import { sleep } from '../../helpers/time';

let h: RoomHarness;
const clients: RawClient[] = [];

beforeAll(async () => {
  h = await startRoomHarness();
});

afterEach(() => {
  for (const c of clients.splice(0)) c.close();
});

afterAll(async () => {
  await h?.close();
});

const publishToken = (room: string, identity = 'pub') => mintPublishToken(TEST_KEYS, room, identity, 60);
const subscribeToken = (room: string, identity = 'viewer') => mintSubscribeToken(TEST_KEYS, room, identity, 60);

async function joinV1(room: string, token: string, join: Parameters<typeof joinRequestParam>[0] = {}): Promise<RawClient> {
  const url = `${h.wsUrl}/rtc/v1?join_request=${joinRequestParam({ connectionSettings: { autoSubscribe: true }, ...join })}`;
  const client = await RawClient.connect(url, { authorization: `Bearer ${token}` });
  clients.push(client);
  return client;
}

async function joinV0(token: string, query = ''): Promise<RawClient> {
  const client = await RawClient.connect(`${h.wsUrl}/rtc?access_token=${token}&auto_subscribe=1&protocol=16${query}`);
  clients.push(client);
  return client;
}

async function refusal(promise: Promise<unknown>): Promise<{ status: number; body: string }> {
  const err = (await promise.then(
    () => {
      throw new Error('expected the upgrade to be refused');
    },
    (e: unknown) => e,
  )) as { status?: number; body?: string };
  return { status: err.status ?? 0, body: err.body ?? '' };
}

test('v1 join: JoinResponse first, with the fields stock clients check', async () => {
  h.openRoom('s-join');
  const client = await joinV1('s-join', await publishToken('s-join', 'alice'));
  expect(await client.firstKind()).toBe('join');
  const join = await client.next('join');
  expect(join.participant?.sid).toMatch(/^PA_/);
  expect(join.participant?.identity).toBe('alice');
  expect(join.room?.sid).toMatch(/^RM_/);
  expect(join.room?.name).toBe('s-join');
  expect(join.serverVersion).toBeTruthy();
  expect(join.serverInfo?.version).toBe(join.serverVersion);
  expect(join.subscriberPrimary).toBe(false);
  expect(join.pingInterval).toBe(5);
  expect(join.pingTimeout).toBe(15);
  expect(join.iceServers).toEqual([]);
  expect(h.server.stats('s-join')).toEqual({ publishers: 0, subscribers: 0, framesIn: 0, width: 0, height: 0, publication: null });
});

test('ping/pong, pingReq/pongResp, garbage ignored, leave closes', async () => {
  h.openRoom('s-ping');
  const client = await joinV1('s-ping', await publishToken('s-ping'));
  await client.next('join');
  client.ws.send(Buffer.from([0xff, 0xff, 0xff]));
  client.send({ case: 'ping', value: protoInt64.parse(1234) });
  expect(typeof (await client.next('pong'))).toBe('bigint');
  client.send({ case: 'pingReq', value: { timestamp: protoInt64.parse(42), rtt: protoInt64.parse(3) } });
  const pong = await client.next('pongResp');
  expect(pong.lastPingTimestamp).toBe(BigInt(42));
  expect(pong.timestamp > BigInt(0)).toBe(true);
  client.send({ case: 'leave', value: { reason: DisconnectReason.CLIENT_INITIATED } });
  await client.waitClosed();
});

test('addTrack → trackPublished; an offer is answered with its id and strict-JSON trickle', async () => {
  h.openRoom('s-offer');
  const client = await joinV1('s-offer', await publishToken('s-offer'));
  await client.next('join');
  client.send({
    case: 'addTrack',
    value: { cid: 'cam-1', name: 'camera', type: TrackType.VIDEO, source: TrackSource.CAMERA, width: 640, height: 480 },
  });
  const published = await client.next('trackPublished');
  expect(published.cid).toBe('cam-1');
  expect(published.track?.sid).toMatch(/^TR_/);
  expect(published.track).toMatchObject({ type: TrackType.VIDEO, width: 640, height: 480, source: TrackSource.CAMERA });

  const pc = new RTCPeerConnection({ iceServers: [] });
  try {
    pc.addTransceiver('video', { direction: 'sendonly' });
    pc.createDataChannel('_reliable');
    const offer = await pc.createOffer();
    await pc.setLocalDescription(offer);
    client.send({ case: 'offer', value: { type: 'offer', sdp: offer.sdp, id: 7 } });
    const answer = await client.next('answer');
    expect(answer.id).toBe(7);
    expect(answer.type).toBe('answer');
    expect(answer.sdp).toMatch(/^v=0/);
    const trickle = await client.next('trickle');
    expect(trickle.target).toBe(SignalTarget.PUBLISHER);
    const candidate = JSON.parse(trickle.candidateInit) as Record<string, unknown>;
    expect(Object.keys(candidate).sort()).toEqual(['candidate', 'sdpMLineIndex', 'sdpMid']);
    expect(candidate.candidate).toMatch(/^candidate:/);
    expect(typeof candidate.sdpMid).toBe('string');
    expect(h.server.stats('s-offer')?.publishers).toBe(1);
  } finally {
    pc.close();
  }
});

test('publishing needs canPublish; a second publisher is refused; the same identity replaces', async () => {
  h.openRoom('s-pub');
  const viewer = await joinV0(await subscribeToken('s-pub'));
  await viewer.next('join');
  viewer.send({ case: 'addTrack', value: { cid: 'x', type: TrackType.VIDEO, width: 320, height: 240 } });
  const refused = await viewer.next('requestResponse');
  expect(refused.reason).toBe(RequestResponse_Reason.NOT_ALLOWED);
  expect(refused.request.case).toBe('addTrack');

  const first = await joinV1('s-pub', await publishToken('s-pub', 'cam-a'));
  await first.next('join');
  first.send({ case: 'addTrack', value: { cid: 'a', type: TrackType.VIDEO, width: 320, height: 240 } });
  await first.next('trackPublished');

  const second = await joinV1('s-pub', await publishToken('s-pub', 'cam-b'));
  await second.next('join');
  second.send({ case: 'addTrack', value: { cid: 'b', type: TrackType.VIDEO, width: 320, height: 240 } });
  const leave = await second.next('leave');
  expect(leave.action).toBe(LeaveRequest_Action.DISCONNECT);
  await second.waitClosed();
  expect(second.messages.some((m) => m.case === 'trackPublished')).toBe(false);

  const again = await joinV1('s-pub', await publishToken('s-pub', 'cam-a'));
  await again.next('join');
  const replaced = await first.next('leave');
  expect(replaced.reason).toBe(DisconnectReason.DUPLICATE_IDENTITY);
  await first.waitClosed();
  again.send({ case: 'addTrack', value: { cid: 'a2', type: TrackType.VIDEO, width: 320, height: 240 } });
  await again.next('trackPublished');
});

test('subscribers: /rtc/v1 answers 404 (clients fall back to /rtc), /rtc is subscriber-primary with a server offer', async () => {
  h.openRoom('s-sub');
  const v1 = await refusal(joinV1('s-sub', await subscribeToken('s-sub')));
  expect(v1.status).toBe(404);
  expect(v1.body).not.toContain('requested room does not exist');

  const viewer = await joinV0(await subscribeToken('s-sub'));
  const join = await viewer.next('join');
  expect(join.subscriberPrimary).toBe(true);
  const offer = await viewer.next('offer');
  expect(offer.id).toBe(1);
  expect(offer.sdp).toContain('m=application');

  const publisher = await joinV1('s-sub', await publishToken('s-sub', 'cam'));
  const pubJoin = await publisher.next('join');
  const update = await viewer.next('update');
  expect(update.participants.map((p) => p.sid)).toContain(pubJoin.participant?.sid);
  expect(pubJoin.otherParticipants.map((p) => p.identity)).toContain('viewer');
  expect(h.server.stats('s-sub')).toMatchObject({ publishers: 0, subscribers: 1 });
});

test('resume of an unknown participant → leave RECONNECT', async () => {
  h.openRoom('s-resume');
  const v0 = await joinV0(await publishToken('s-resume'), '&reconnect=1&sid=PA_gone');
  const leave = await v0.next('leave');
  expect(leave.action).toBe(LeaveRequest_Action.RECONNECT);
  expect(v0.messages.some((m) => m.case === 'join')).toBe(false);
  await v0.waitClosed();

  const v1 = await joinV1('s-resume', await publishToken('s-resume'), { reconnect: true, participantSid: 'PA_gone' });
  expect((await v1.next('leave')).action).toBe(LeaveRequest_Action.RECONNECT);
});

test('closeRoom ends everyone with leave DISCONNECT and refuses later joins', async () => {
  h.openRoom('s-close');
  const a = await joinV1('s-close', await publishToken('s-close'));
  const b = await joinV0(await subscribeToken('s-close'));
  await a.next('join');
  await b.next('join');
  h.endRoom('s-close');
  for (const c of [a, b]) {
    const leave = await c.next('leave');
    expect(leave.action).toBe(LeaveRequest_Action.DISCONNECT);
    expect(leave.reason).toBe(DisconnectReason.ROOM_DELETED);
    await c.waitClosed();
  }
  expect(h.server.stats('s-close')).toBeUndefined();
  const later = await refusal(joinV1('s-close', await publishToken('s-close')));
  expect(later).toEqual({ status: 404, body: 'requested room does not exist' });
});

test('tokens: 401 with a reason on upgrade and on validate; validate allows any origin', async () => {
  h.openRoom('s-auth');
  const now = Math.floor(Date.now() / 1000);
  const bad = signRoomJwt({ ...TEST_KEYS, apiSecret: 'wrong' }, { sub: 'x', exp: now + 60, video: { room: 's-auth', roomJoin: true } });
  const expired = signRoomJwt(TEST_KEYS, { sub: 'x', exp: now - 60, video: { room: 's-auth', roomJoin: true } });
  const noJoin = signRoomJwt(TEST_KEYS, { sub: 'x', exp: now + 60, video: { room: 's-auth' } });
  for (const token of [bad, expired, noJoin, 'not.a.jwt']) {
    const upgrade = await refusal(RawClient.connect(`${h.wsUrl}/rtc?access_token=${token}`));
    expect(upgrade.status).toBe(401);
    const res = await fetch(`${h.httpUrl}/rtc/v1/validate?access_token=${token}`);
    expect(res.status).toBe(401);
    expect(res.headers.get('access-control-allow-origin')).toBe('*');
    expect(await res.text()).toBe(upgrade.body);
  }
  expect((await refusal(RawClient.connect(`${h.wsUrl}/rtc`))).status).toBe(401);

  const ok = await fetch(`${h.httpUrl}/rtc/v1/validate`, { headers: { authorization: `Bearer ${await publishToken('s-auth')}` } });
  expect([ok.status, await ok.text()]).toEqual([200, 'success']);
  const missing = await fetch(`${h.httpUrl}/rtc/validate?access_token=${await publishToken('nope')}`);
  expect([missing.status, await missing.text()]).toEqual([404, 'requested room does not exist']);
  const subV1 = await fetch(`${h.httpUrl}/rtc/v1/validate?access_token=${await subscribeToken('s-auth')}`);
  expect(subV1.status).toBe(404);
  expect(await subV1.text()).not.toContain('requested room does not exist');
  const subV0 = await fetch(`${h.httpUrl}/rtc/validate?access_token=${await subscribeToken('s-auth')}`);
  expect(subV0.status).toBe(200);
  const preflight = await fetch(`${h.httpUrl}/rtc/validate`, { method: 'OPTIONS' });
  expect(preflight.status).toBe(204);
  expect(preflight.headers.get('access-control-allow-origin')).toBe('*');
  expect(h.server.stats('s-auth')).toBeUndefined();
});

test('bad join_request → 400; other paths are not handled', async () => {
  h.openRoom('s-bad');
  const token = await publishToken('s-bad');
  const bad = await refusal(RawClient.connect(`${h.wsUrl}/rtc/v1?join_request=AAAA____&access_token=${token}`));
  expect(bad.status).toBe(400);
  const req = { url: '/elsewhere', headers: {} } as never;
  expect(h.server.handleUpgrade(req, undefined as never, Buffer.alloc(0))).toBe(false);
});

test('a silent client, or one leaving an offer unanswered, is dropped after the ping timeout; close() ends the rest', async () => {
  const quick = await startRoomHarness({ pingIntervalSeconds: 1, pingTimeoutSeconds: 2 });
  try {
    quick.openRoom('s-quiet');
    const token = await publishToken('s-quiet');
    const silent = await RawClient.connect(`${quick.wsUrl}/rtc?access_token=${token}`);
    clients.push(silent);
    const join = await silent.next('join');
    expect([join.pingInterval, join.pingTimeout]).toEqual([1, 2]);
    const t0 = Date.now();
    await silent.next('leave', 5000);
    await silent.waitClosed();
    expect(Date.now() - t0).toBeGreaterThanOrEqual(1500);

    const chatty = await RawClient.connect(`${quick.wsUrl}/rtc?access_token=${token}`);
    const noAnswer = await RawClient.connect(`${quick.wsUrl}/rtc?access_token=${await subscribeToken('s-quiet')}`);
    clients.push(chatty, noAnswer);
    await chatty.next('join');
    await noAnswer.next('offer');
    for (let i = 0; i < 6; i += 1) {
      for (const c of [chatty, noAnswer]) c.send({ case: 'ping', value: protoInt64.parse(Date.now()) });
      await sleep(500);
    }
    expect(chatty.closed).toBe(false);
    const dropped = await noAnswer.next('leave');
    expect([dropped.action, dropped.reason]).toEqual([LeaveRequest_Action.RECONNECT, DisconnectReason.MEDIA_FAILURE]);
    await quick.close();
    expect((await chatty.next('leave')).reason).toBe(DisconnectReason.SERVER_SHUTDOWN);
    await chatty.waitClosed();
  } finally {
    await quick.close();
  }
});

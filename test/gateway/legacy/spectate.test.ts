/**
 * @jest-environment ./test/media-environment.js
 *
 * `POST /v0.2/streams/{id}/spectate` end to end: the gateway hands out the upstream's viewer token
 * under the vendor's name, and a stock @livekit/rtc-node participant joined with it receives the
 * stream's video (the emulator's synthetic test pattern, whose index it decodes), subscribe-only.
 */
import * as rtc from '@livekit/rtc-node';
import { rawToRgb } from '../../../src/emulator/frames/codec';
import { decodePattern } from '../../../src/emulator/frames/pattern';
import { verifyRoomToken } from '../../../src/emulator/room';
import { frameBody, http, startStack } from '../../helpers/stack';
import type { Stack } from '../../helpers/stack';
import { deadline, until } from '../../helpers/time';

let s: Stack;
beforeAll(async () => {
  s = await startStack({ emulator: { autoPublish: { enabled: true, fps: 10, width: 320, height: 240 } } });
});
afterAll(async () => {
  // Closing the gateway disposes rtc-node (process-wide): the viewer is gone by then.
  await s?.close();
});

test('a native stream is watched with the spectate token: frames arrive, the token cannot publish, a fresh one each call', async () => {
  const id = ((await http(s.url, 'POST', '/v0.2/streams', { body: frameBody() })).body as { stream_id: string }).stream_id;
  const r = await http(s.url, 'POST', `/v0.2/streams/${id}/spectate`);
  expect(r.status).toBe(200);
  expect(Object.keys(r.body as object)).toEqual(['room']);
  const view = (r.body as { room: { url: string; token: string } }).room;
  expect(Object.keys(view).sort()).toEqual(['token', 'url']);
  const claims = await verifyRoomToken({ apiKey: s.cfg.emulator.room.apiKey, apiSecret: s.cfg.emulator.room.apiSecret }, view.token);
  expect(claims.video).toMatchObject({ room: id, roomJoin: true, canSubscribe: true, canPublish: false });
  const again = (await http(s.url, 'POST', `/v0.2/streams/${id}/spectate`)).body as { room: { token: string } };
  expect(again.room.token).not.toBe(view.token);

  const room = new rtc.Room();
  const indices: number[] = [];
  room.on(rtc.RoomEvent.TrackSubscribed, (track) => {
    if (track.kind !== rtc.TrackKind.KIND_VIDEO) return;
    const reader = new rtc.VideoStream(track).getReader();
    void (async () => {
      for (;;) {
        const next = await reader.read();
        if (next.done) return;
        const f = next.value.frame.convert(rtc.VideoBufferType.I420);
        const index = decodePattern(rawToRgb({ width: f.width, height: f.height, format: 'i420', data: f.data }));
        if (index !== null) indices.push(index);
      }
    })().catch(() => undefined);
  });
  try {
    await room.connect(view.url, view.token, { autoSubscribe: true, dynacast: false });
    await deadline(
      until(() => indices.length >= 5, 20),
      30_000,
      'the viewer decoded five pattern frames',
    );
    // The live pattern: indices move forward.
    expect(indices[indices.length - 1]!).toBeGreaterThan(indices[0]!);
  } finally {
    await room.disconnect();
  }
  await http(s.url, 'DELETE', `/v0.2/streams/${id}`);
  expect(await http(s.url, 'POST', `/v0.2/streams/${id}/spectate`)).toMatchObject({ status: 404, body: { error: 'stream_not_found' } });
}, 60_000);

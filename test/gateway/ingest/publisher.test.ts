/**
 * @jest-environment ./test/media-environment.js
 *
 * The relay's upstream publisher (rtc-node) against the emulator's media room: the track goes up at
 * the first frame, a renewed token is kept but not used while connected, and when the room drops
 * the connection the publisher comes back with the newest token.
 */
import * as rtc from '@livekit/rtc-node';
import { PatternRenderer, decodePattern } from '../../../src/emulator/frames/pattern';
import { rawToRgb } from '../../../src/emulator/frames/codec';
import { mintPublishToken, mintSubscribeToken } from '../../../src/emulator/room';
import { createLogger } from '../../../src/lib/logger';
import { UpstreamPublisher } from '../../../src/gateway/ingest/publisher';
import { TEST_KEYS, startRoomHarness } from '../../emulator/room/harness';
import { deadline, until, sleep } from '../../helpers/time';
import type { RoomHarness } from '../../emulator/room/harness';

let h: RoomHarness;

beforeAll(async () => {
  h = await startRoomHarness();
});

afterAll(async () => {
  await h?.close();
  await rtc.dispose();
});

/** Which identity publishes the room's video, as a subscriber sees it. */
async function publisherIdentity(room: string): Promise<string> {
  const viewer = new rtc.Room();
  let timer: NodeJS.Timeout | undefined;
  try {
    const seen = new Promise<string>((resolve) => {
      viewer.on(rtc.RoomEvent.TrackSubscribed, (_t, _p, participant) => resolve(participant.identity));
      timer = setTimeout(() => resolve('none'), 5000);
    });
    await viewer.connect(h.wsUrl, await mintSubscribeToken(TEST_KEYS, room, `viewer-${Date.now()}`, 60), {
      autoSubscribe: true,
      dynacast: false,
    });
    return await seen;
  } finally {
    clearTimeout(timer);
    await viewer.disconnect();
  }
}

test('publishes at the first frame; after the room drops it, reconnects with the renewed token', async () => {
  const sink = h.openRoom('relay-up');
  const publisher = new UpstreamPublisher({
    rtc,
    url: h.wsUrl,
    token: await mintPublishToken(TEST_KEYS, 'relay-up', 'relay-first', 60),
    logger: createLogger('silent'),
  });
  const renderer = new PatternRenderer(320, 240);
  let index = 0;
  const timer = setInterval(() => publisher.push({ width: 320, height: 240, data: renderer.renderI420(index++) }), 100);
  try {
    await publisher.connect();
    expect(publisher.connected).toBe(true);
    await sink.until(() => sink.count >= 5, 10_000, '5 frames');
    const seen = decodePattern(rawToRgb(sink.last!));
    expect(seen).not.toBeNull();
    expect(seen!).toBeLessThan(index);
    expect(await publisherIdentity('relay-up')).toBe('relay-first');

    // A renewed token changes nothing while connected.
    publisher.renewToken(await mintPublishToken(TEST_KEYS, 'relay-up', 'relay-renewed', 60));
    await sleep(300);
    expect(publisher.reconnects).toBe(0);

    // The room drops everyone (as on a server restart); the publisher comes back on its own.
    const before = sink.count;
    h.server.closeRoom('relay-up');
    await sink.until(() => sink.count >= before + 10, 10_000, '10 more frames after the drop');
    expect(publisher.reconnects).toBe(1);
    expect(publisher.connected).toBe(true);
    expect(await publisherIdentity('relay-up')).toBe('relay-renewed');
    expect(decodePattern(rawToRgb(sink.last!))!).toBeGreaterThan(seen!);
  } finally {
    clearInterval(timer);
    await publisher.close();
  }
  expect(publisher.connected).toBe(false);
  // Once the room has seen it leave, no frame of it arrives (frames already on their way may land before).
  await deadline(
    until(() => h.server.stats('relay-up')?.publishers === 0, 20),
    10_000,
    'the room saw the publisher leave',
  );
  const after = sink.count;
  await sleep(300);
  expect(sink.count).toBe(after);
}, 90_000);

test('a room that refuses the token fails connect(), and close() is clean', async () => {
  h.openRoom('relay-refused');
  const publisher = new UpstreamPublisher({
    rtc,
    url: h.wsUrl,
    token: await mintPublishToken(TEST_KEYS, 'no-such-room', 'relay', 60),
    logger: createLogger('silent'),
  });
  await expect(publisher.connect()).rejects.toThrow();
  expect(publisher.connected).toBe(false);
  await publisher.close();
  expect(publisher.reconnects).toBe(0);
}, 90_000);

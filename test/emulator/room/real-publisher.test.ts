/**
 * @jest-environment ./test/media-environment.js
 *
 * When a real publisher's video starts in a stream's room, the synthetic publisher
 * of that stream stops, so windows never interleave the test pattern with the client's camera.
 */
import * as rtc from '@livekit/rtc-node';
import { PatternRenderer } from '../../../src/emulator/frames/pattern';
import { createLogger } from '../../../src/lib/logger';
import { startEmulator } from '../../../src/emulator/server';
import type { RunningEmulator } from '../../../src/emulator/server';
import { http } from '../../helpers/stack';
import { TEST_PUBLISHER, testConfig } from '../../helpers/config';
import { sleep } from '../../helpers/time';

let emu: RunningEmulator;

beforeAll(async () => {
  const cfg = testConfig({ emulator: { autoPublish: TEST_PUBLISHER } });
  emu = await startEmulator(cfg, createLogger('silent'));
});

afterAll(async () => {
  await emu?.close();
  await rtc.dispose();
});

test('a real publication stops the synthetic publisher of that stream only', async () => {
  const create = async () =>
    (await http(emu.url, 'POST', '/v1beta/streams', { body: {} })).body as { id: string; publish: { url: string; token: string } };
  const mine = await create();
  const other = await create();
  const running = emu.emulator.publishers;
  expect([running.isRunning(mine.id), running.isRunning(other.id)]).toEqual([true, true]);

  const room = new rtc.Room();
  const source = new rtc.VideoSource(160, 120);
  const renderer = new PatternRenderer(160, 120);
  let captured = 0;
  const timer = setInterval(() => {
    source.captureFrame(new rtc.VideoFrame(renderer.renderI420(1000 + captured++), 160, 120, rtc.VideoBufferType.I420));
  }, 100);
  try {
    await room.connect(mine.publish.url, mine.publish.token, { autoSubscribe: false, dynacast: false });
    const track = rtc.LocalVideoTrack.createVideoTrack('camera', source);
    await room.localParticipant!.publishTrack(track, new rtc.TrackPublishOptions({ source: rtc.TrackSource.SOURCE_CAMERA }));
    // Ordered by events, not time: wait until the room's publication has reached the stream.
    for (let i = 0; i < 200 && running.isRunning(mine.id); i++) await sleep(50);
    expect([running.isRunning(mine.id), running.isRunning(other.id)]).toEqual([false, true]);
  } finally {
    clearInterval(timer);
    await room.disconnect();
    await source.close();
  }
});

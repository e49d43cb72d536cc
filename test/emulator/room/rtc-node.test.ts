/**
 * @jest-environment ./test/media-environment.js
 *
 * @livekit/rtc-node against the emulator's media room over real sockets: publish synthetic I420
 * pattern frames, receive them decoded in the room's sink, subscribe with other participants.
 */
import * as rtc from '@livekit/rtc-node';
import { AccessToken } from 'livekit-server-sdk';
import { rawToRgb } from '../../../src/emulator/frames/codec';
import { PatternRenderer, decodePattern } from '../../../src/emulator/frames/pattern';
import type { RawFrame } from '../../../src/emulator/frames/types';
import { mintPublishToken, mintSubscribeToken } from '../../../src/emulator/room';
import { TEST_KEYS, signRoomJwt, startRoomHarness } from './harness';
import type { RoomHarness } from './harness';
import { deadline, until, sleep } from '../../helpers/time';

let h: RoomHarness;

beforeAll(async () => {
  h = await startRoomHarness();
});

afterAll(async () => {
  await h?.close();
  await rtc.dispose();
});

const patternIndex = (raw: RawFrame) => decodePattern(rawToRgb(raw));

/** An rtc-node participant publishing pattern frames (index = capture count) from a timer. */
class PatternPublisher {
  readonly room = new rtc.Room();
  captured = 0;
  private source: rtc.VideoSource | undefined;
  private renderer: PatternRenderer | undefined;
  private timer: NodeJS.Timeout | undefined;

  async connect(token: string): Promise<void> {
    await this.room.connect(h.wsUrl, token, { autoSubscribe: false, dynacast: false });
  }

  async publish(width: number, height: number, simulcast = false): Promise<string | undefined> {
    this.source = new rtc.VideoSource(width, height);
    const track = rtc.LocalVideoTrack.createVideoTrack('pattern', this.source);
    const options = new rtc.TrackPublishOptions({ source: rtc.TrackSource.SOURCE_CAMERA, simulcast });
    const publication = await this.room.localParticipant!.publishTrack(track, options);
    return publication.sid;
  }

  /** Captures `fps` frames a second at this size until changed or closed. */
  play(width: number, height: number, fps: number): void {
    this.renderer = new PatternRenderer(width, height);
    if (this.timer) return;
    this.timer = setInterval(() => {
      const r = this.renderer!;
      const data = r.renderI420(this.captured++);
      this.source?.captureFrame(new rtc.VideoFrame(data, r.width, r.height, rtc.VideoBufferType.I420));
    }, 1000 / fps);
  }

  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await this.room.disconnect();
    await this.source?.close();
  }
}

/** An rtc-node participant reading the video track it was last given (frames count per track). */
class Subscriber {
  readonly room = new rtc.Room();
  frames = 0;
  last: RawFrame | undefined;
  trackSid: string | undefined;
  publisherIdentity: string | undefined;
  private reader: ReadableStreamDefaultReader<rtc.VideoFrameEvent> | undefined;

  constructor() {
    this.room.on(rtc.RoomEvent.TrackSubscribed, (track, publication, participant) => {
      if (track.kind !== rtc.TrackKind.KIND_VIDEO) return;
      void this.reader?.cancel().catch(() => undefined);
      this.trackSid = publication.sid;
      this.publisherIdentity = participant.identity;
      this.frames = 0;
      const reader = new rtc.VideoStream(track).getReader();
      this.reader = reader;
      void this.pump(reader);
    });
  }

  async connect(token: string, autoSubscribe = true): Promise<void> {
    await this.room.connect(h.wsUrl, token, { autoSubscribe, dynacast: false });
  }

  private async pump(reader: ReadableStreamDefaultReader<rtc.VideoFrameEvent>): Promise<void> {
    for (;;) {
      const next = await reader.read().catch(() => ({ done: true as const, value: undefined }));
      if (next.done || !next.value || reader !== this.reader) return;
      const frame = next.value.frame.convert(rtc.VideoBufferType.I420);
      this.frames += 1;
      this.last = { width: frame.width, height: frame.height, format: 'i420', data: frame.data };
    }
  }

  /** Waits for `n` frames of track `trackSid`. */
  async waitFrames(trackSid: string | undefined, n: number, timeoutMs: number): Promise<void> {
    const until = Date.now() + timeoutMs;
    while (this.trackSid !== trackSid || this.frames < n) {
      if (Date.now() > until) throw new Error(`subscriber got ${this.frames} frames of ${this.trackSid}, wanted ${n} of ${trackSid}`);
      await sleep(50);
    }
  }

  async close(): Promise<void> {
    await this.reader?.cancel().catch(() => undefined);
    await this.room.disconnect();
  }
}

test('publishes I420 frames that arrive decoded with their pattern, size changes included', async () => {
  const sink = h.openRoom('stream-pub');
  const pub = new PatternPublisher();
  try {
    const t0 = Date.now();
    await pub.connect(await mintPublishToken(TEST_KEYS, 'stream-pub', 'pub-1', 60));
    expect(await pub.publish(320, 240)).toMatch(/^TR_/);
    pub.play(320, 240, 10);
    await sink.until(() => (sink.sizes.get('320x240') ?? 0) >= 12, 10000, '12 frames of 320x240');
    const firstFrameMs = sink.arrivals[0] - t0;
    expect(sink.last!.format).toBe('i420');
    expect(sink.last!.data.length).toBe((320 * 240 * 3) / 2);
    const index = patternIndex(sink.last!);
    expect(index).not.toBeNull();
    expect(index!).toBeLessThanOrEqual(pub.captured);
    expect(index!).toBeGreaterThan(pub.captured - 10);
    const fps = sink.fps(1000);

    pub.play(160, 120, 10);
    await sink.until(() => (sink.sizes.get('160x120') ?? 0) >= 5, 8000, '5 frames of 160x120');
    expect(patternIndex(sink.last!)).toBeGreaterThan(index!);
    expect(h.server.stats('stream-pub')).toMatchObject({ publishers: 1, width: 160, height: 120 });
    expect(h.server.stats('stream-pub')!.framesIn).toBe(sink.count);
    console.log(
      `rtc-node 320x240@10: first frame ${firstFrameMs} ms after connect start, ${fps} fps received; sizes ${JSON.stringify([...sink.sizes])}`,
    );

    // The publisher leaving ends nothing else: the room stays, frames just stop (once the room has
    // seen it leave; frames already on their way may land before).
    await pub.close();
    await deadline(
      until(() => h.server.stats('stream-pub')?.publishers === 0, 20),
      10_000,
      'the room saw the publisher leave',
    );
    const after = sink.count;
    await sleep(500);
    expect(sink.count).toBe(after);
    expect(h.server.stats('stream-pub')).toMatchObject({ publishers: 0, subscribers: 0 });
  } finally {
    await pub.close().catch(() => undefined);
  }
}, 90_000);

test('a 1280x720 simulcast publication arrives at full size from the start (top layer accepted)', async () => {
  const sink = h.openRoom('stream-720');
  const pub = new PatternPublisher();
  try {
    await pub.connect(await mintPublishToken(TEST_KEYS, 'stream-720', 'pub-720', 60));
    await pub.publish(1280, 720, true);
    const cpu0 = process.cpuUsage();
    const t0 = Date.now();
    pub.play(1280, 720, 15);
    await sink.until(() => sink.count >= 20, 10000, '20 frames');
    const cpu = process.cpuUsage(cpu0);
    const cpuPct = Math.round(((cpu.user + cpu.system) / 1000 / (Date.now() - t0)) * 100);
    expect([...sink.sizes.keys()]).toEqual(['1280x720']);
    expect(patternIndex(sink.last!)).not.toBeNull();
    console.log(
      `rtc-node 1280x720@15 simulcast: ${sink.fps(1000)} fps received, ${cpuPct}% of one core (publisher encode + room decode, one process)`,
    );
  } finally {
    await pub.close().catch(() => undefined);
  }
}, 90_000);

test('subscribers receive the published video: joined before, after, on request, and across publishers', async () => {
  const sink = h.openRoom('stream-sub');
  const early = new Subscriber();
  const late = new Subscriber();
  const manual = new Subscriber();
  const pub = new PatternPublisher();
  const next = new PatternPublisher();
  try {
    await early.connect(await mintSubscribeToken(TEST_KEYS, 'stream-sub', 'viewer-early', 60));
    await pub.connect(await mintPublishToken(TEST_KEYS, 'stream-sub', 'pub-2', 60));
    const trackSid = await pub.publish(320, 240);
    pub.play(320, 240, 10);
    await early.waitFrames(trackSid, 5, 10000);
    expect(early.publisherIdentity).toBe('pub-2');

    await late.connect(await mintSubscribeToken(TEST_KEYS, 'stream-sub', 'viewer-late', 60));
    await late.waitFrames(trackSid, 5, 10000);

    // autoSubscribe off: nothing arrives until the client asks (↑ subscription).
    await manual.connect(await mintSubscribeToken(TEST_KEYS, 'stream-sub', 'viewer-manual', 60), false);
    await sleep(500);
    expect(manual.trackSid).toBeUndefined();
    const remote = manual.room.remoteParticipants.get('pub-2');
    const publication = remote?.trackPublications.get(trackSid!);
    expect(publication).toBeDefined();
    publication!.setSubscribed(true);
    await manual.waitFrames(trackSid, 5, 10000);
    expect(h.server.stats('stream-sub')).toMatchObject({ publishers: 1, subscribers: 3 });

    for (const s of [early, late, manual]) {
      expect([s.last!.width, s.last!.height]).toEqual([320, 240]);
      const index = patternIndex(s.last!);
      expect(index).not.toBeNull();
      expect(index!).toBeGreaterThan(pub.captured - 15);
    }
    expect(sink.count).toBeGreaterThan(5);

    // The publisher goes: subscribers stay connected and see the track go away …
    const unsubscribed = new Promise<void>((resolve) => early.room.once(rtc.RoomEvent.TrackUnsubscribed, () => resolve()));
    await pub.close();
    await unsubscribed;
    expect(early.room.isConnected).toBe(true);
    expect(h.server.stats('stream-sub')).toMatchObject({ publishers: 0, subscribers: 3 });

    // … and get the next publisher's track on the same connection.
    await next.connect(await mintPublishToken(TEST_KEYS, 'stream-sub', 'pub-3', 60));
    const nextSid = await next.publish(160, 120);
    next.play(160, 120, 10);
    await early.waitFrames(nextSid, 5, 10000);
    expect(early.publisherIdentity).toBe('pub-3');
    expect([early.last!.width, early.last!.height]).toEqual([160, 120]);
  } finally {
    await Promise.all([pub, next, early, late, manual].map((c) => c.close().catch(() => undefined)));
  }
}, 90_000);

test('a token that may publish and subscribe publishes over /rtc (two peer connections)', async () => {
  const sink = h.openRoom('stream-both');
  const pub = new PatternPublisher();
  try {
    const at = new AccessToken(TEST_KEYS.apiKey, TEST_KEYS.apiSecret, { identity: 'both', ttl: 60 });
    at.addGrant({ room: 'stream-both', roomJoin: true }); // LiveKit: unset canPublish/canSubscribe mean allowed
    await pub.connect(await at.toJwt());
    await pub.publish(320, 240);
    pub.play(320, 240, 10);
    await sink.until(() => sink.count >= 5, 10000, '5 frames');
    expect(patternIndex(sink.last!)).not.toBeNull();
  } finally {
    await pub.close().catch(() => undefined);
  }
}, 90_000);

test('refuses bad, expired and wrong-grant tokens and unknown rooms', async () => {
  h.openRoom('stream-auth');
  const now = Math.floor(Date.now() / 1000);
  const tokens = [
    signRoomJwt({ ...TEST_KEYS, apiSecret: 'not-the-secret' }, { sub: 'x', exp: now + 60, video: { room: 'stream-auth', roomJoin: true } }),
    signRoomJwt(TEST_KEYS, { sub: 'x', nbf: now - 120, exp: now - 60, video: { room: 'stream-auth', roomJoin: true } }),
    signRoomJwt(TEST_KEYS, { sub: 'x', exp: now + 60, video: { room: 'stream-auth', roomJoin: false } }),
    await mintPublishToken(TEST_KEYS, 'no-such-stream', 'x', 60),
  ];
  for (const token of tokens) {
    const room = new rtc.Room();
    await expect(room.connect(h.wsUrl, token, { autoSubscribe: false, dynacast: false })).rejects.toThrow();
    await room.disconnect().catch(() => undefined);
  }
  expect(h.server.stats('stream-auth')).toBeUndefined();
}, 90_000);

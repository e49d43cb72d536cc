/**
 * @jest-environment ./test/media-environment.js
 *
 * POST /v1beta/streams/{id}/viewer-token (the provider's "Create viewer token" page) and the room
 * serving its viewers, on real sockets: the answer's shape and 404s, @livekit/rtc-node joined with
 * a viewer token receiving a native publisher's video and the synthetic test pattern (the same
 * lifetime indices the model reads), and a viewer token refused when it publishes.
 */
import { RequestResponse_Reason, TrackSource, TrackType } from '@livekit/protocol';
import * as rtc from '@livekit/rtc-node';
import { SYNTHETIC_IDENTITY } from '../../../src/emulator/app';
import { rawToRgb } from '../../../src/emulator/frames/codec';
import { PatternRenderer, decodePattern } from '../../../src/emulator/frames/pattern';
import type { RawFrame } from '../../../src/emulator/frames/types';
import { verifyRoomToken } from '../../../src/emulator/room';
import { startEmulator } from '../../../src/emulator/server';
import type { RunningEmulator } from '../../../src/emulator/server';
import { createLogger } from '../../../src/lib/logger';
import { http, KEY, KEY_B } from '../../helpers/stack';
import { testConfig } from '../../helpers/config';
import { deadline, until } from '../../helpers/time';
import { RawClient } from './raw-client';

interface Created {
  id: string;
  publish: { url: string; token: string };
}
interface View {
  url: string;
  token: string;
  expires_in_seconds: number;
}

let emu: RunningEmulator;

beforeAll(async () => {
  const cfg = testConfig({ emulator: { autoPublish: { enabled: false } } });
  emu = await startEmulator(cfg, createLogger(process.env.ROOM_TEST_LOG ?? 'silent'));
});

afterAll(async () => {
  await emu?.close();
  await rtc.dispose();
});

const create = async (key = KEY) => (await http(emu.url, 'POST', '/v1beta/streams', { key, body: {} })).body as Created;
const askViewerToken = (id: string, key = KEY) => http(emu.url, 'POST', `/v1beta/streams/${id}/viewer-token`, { key });
async function viewOf(id: string): Promise<View> {
  const r = await askViewerToken(id);
  expect(r.status).toBe(200);
  return (r.body as { view: View }).view;
}
const startPattern = (id: string) =>
  http(emu.url, 'POST', `/_emulator/streams/${id}/publisher`, { body: { fps: 10, width: 320, height: 240 } });
const patternIndex = (raw: RawFrame) => decodePattern(rawToRgb(raw));

/** The pattern index the model reads in frame `index` of the stream (the analyzer's `pattern=` tail). */
async function modelSees(id: string, index: number): Promise<string> {
  const r = await http(emu.url, 'POST', '/v1beta/chat/completions', {
    body: {
      model: 'local/analyzer',
      messages: [
        {
          role: 'user',
          content: [{ type: 'image_url', image_url: { url: `${emu.emulator.ctx.brand.scheme}://streams/${id}?frame_index=${index}` } }],
        },
      ],
    },
  });
  expect(r.status).toBe(200);
  const content = (r.body as { choices: { message: { content: string } }[] }).choices[0]!.message.content;
  return /pattern=(\S+)\]/.exec(content)?.[1] ?? content;
}

/** A stock rtc-node participant joined with a viewer token, decoding the pattern of the video it receives. */
class Viewer {
  readonly room = new rtc.Room();
  /** Of the track received last: its sid, its publisher, decoded pattern indices (null: no pattern). */
  trackSid: string | undefined;
  publisherIdentity: string | undefined;
  indices: (number | null)[] = [];
  size: [number, number] | undefined;
  private reader: ReadableStreamDefaultReader<rtc.VideoFrameEvent> | undefined;
  private readonly waiters = new Set<() => void>();

  constructor() {
    this.room.on(rtc.RoomEvent.TrackSubscribed, (track, publication, participant) => {
      if (track.kind !== rtc.TrackKind.KIND_VIDEO) return;
      void this.reader?.cancel().catch(() => undefined);
      this.trackSid = publication.sid;
      this.publisherIdentity = participant.identity;
      this.indices = [];
      const reader = new rtc.VideoStream(track).getReader();
      this.reader = reader;
      void this.pump(reader);
    });
  }

  connect(view: View): Promise<void> {
    return this.room.connect(view.url, view.token, { autoSubscribe: true, dynacast: false });
  }

  private async pump(reader: ReadableStreamDefaultReader<rtc.VideoFrameEvent>): Promise<void> {
    for (;;) {
      const next = await reader.read().catch(() => ({ done: true as const, value: undefined }));
      if (next.done || !next.value || reader !== this.reader) return;
      const frame = next.value.frame.convert(rtc.VideoBufferType.I420);
      this.size = [frame.width, frame.height];
      this.indices.push(patternIndex({ width: frame.width, height: frame.height, format: 'i420', data: frame.data }));
      for (const wake of [...this.waiters]) wake();
    }
  }

  /** Resolves once `check` holds (tested on every received frame); a timeout is a failure. */
  until(check: () => boolean, timeoutMs: number, what: string): Promise<void> {
    let wake = () => undefined as void;
    const met = new Promise<void>((resolve) => {
      wake = () => {
        if (check()) resolve();
      };
      this.waiters.add(wake);
      wake();
    });
    return deadline(met, timeoutMs, `${what} (got ${JSON.stringify(this.indices.slice(-5))} from ${this.publisherIdentity})`).finally(() =>
      this.waiters.delete(wake),
    );
  }

  decoded(): number[] {
    return this.indices.filter((i): i is number => i !== null);
  }

  async close(): Promise<void> {
    await this.reader?.cancel().catch(() => undefined);
    await this.room.disconnect();
  }
}

/** An rtc-node publisher with the stream's publish token, capturing pattern frames (index = capture count + offset). */
class PatternPublisher {
  readonly room = new rtc.Room();
  captured = 0;
  private readonly source = new rtc.VideoSource(320, 240);
  private readonly renderer = new PatternRenderer(320, 240);
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly first: number) {}

  async start(publish: { url: string; token: string }): Promise<string | undefined> {
    await this.room.connect(publish.url, publish.token, { autoSubscribe: false, dynacast: false });
    const track = rtc.LocalVideoTrack.createVideoTrack('camera', this.source);
    const publication = await this.room.localParticipant!.publishTrack(
      track,
      new rtc.TrackPublishOptions({ source: rtc.TrackSource.SOURCE_CAMERA }),
    );
    this.timer = setInterval(() => {
      const data = this.renderer.renderI420(this.first + this.captured++);
      this.source.captureFrame(new rtc.VideoFrame(data, 320, 240, rtc.VideoBufferType.I420));
    }, 100);
    return publication.sid;
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.room.disconnect();
    await this.source.close();
  }
}

describe('POST /v1beta/streams/{id}/viewer-token', () => {
  test('200 {view: {url, token, expires_in_seconds: 300}}: a subscribe-only room token for this stream, one identity per viewer', async () => {
    const s = await create();
    const r = await askViewerToken(s.id);
    expect(r.status).toBe(200);
    const body = r.body as { view: View };
    expect(Object.keys(body)).toEqual(['view']);
    expect(Object.keys(body.view).sort()).toEqual(['expires_in_seconds', 'token', 'url']);
    expect(body.view.expires_in_seconds).toBe(300);
    expect(body.view.url).toBe(s.publish.url);
    expect(body.view.url).toMatch(/^ws:\/\//);

    const claims = await verifyRoomToken(emu.emulator.ctx.roomKeys, body.view.token);
    expect(claims.video).toMatchObject({ room: s.id, roomJoin: true, canSubscribe: true, canPublish: false, canPublishData: false });
    expect((claims.exp as number) - (claims.nbf as number)).toBe(300);
    expect(Math.abs((claims.exp as number) - (Date.now() / 1000 + 300))).toBeLessThan(30);
    const second = await verifyRoomToken(emu.emulator.ctx.roomKeys, (await viewOf(s.id)).token);
    expect(claims.sub).toMatch(/^viewer-/);
    expect(second.sub).toMatch(/^viewer-/);
    expect(second.sub).not.toBe(claims.sub);
    expect(claims.sub).not.toBe(`publisher-${s.id}`);
  });

  test("404 stream_not_found for another key's, an unknown, a deleted and an expired stream; auth, UUID and region as the other stream routes", async () => {
    const notFound = (id: string) => ({
      detail: { error: expect.objectContaining({ type: 'stream_error', code: 'stream_not_found', message: expect.stringContaining(id) }) },
    });
    const mine = await create();
    const other = await askViewerToken(mine.id, KEY_B);
    expect(other.status).toBe(404);
    expect(other.body).toEqual(notFound(mine.id));

    const unknown = '00000000-0000-4000-8000-000000000000';
    expect(await askViewerToken(unknown)).toMatchObject({ status: 404, body: notFound(unknown) });

    const deleted = await create();
    expect((await http(emu.url, 'DELETE', `/v1beta/streams/${deleted.id}`)).status).toBe(200);
    expect((await http(emu.url, 'GET', `/v1beta/streams/${deleted.id}`)).status).toBe(200); // tombstone still readable
    expect(await askViewerToken(deleted.id)).toMatchObject({ status: 404, body: notFound(deleted.id) });

    const expired = await create();
    expect((await http(emu.url, 'POST', `/_emulator/streams/${expired.id}/expire`)).status).toBe(200);
    expect(await askViewerToken(expired.id)).toMatchObject({ status: 404, body: notFound(expired.id) });

    expect((await http(emu.url, 'POST', `/v1beta/streams/${mine.id}/viewer-token`, { key: null })).status).toBe(401);
    expect((await http(emu.url, 'POST', `/v1beta/streams/not-a-uuid/viewer-token`)).status).toBe(422);
    const res = await fetch(`${emu.url}/v1beta/streams/${mine.id}/viewer-token`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, [emu.emulator.ctx.brand.regionHeader]: 'us-central1' },
    });
    expect(res.status).toBe(409);
  });

  test('a token minted before the stream ended no longer joins its room', async () => {
    const s = await create();
    const view = await viewOf(s.id);
    await http(emu.url, 'DELETE', `/v1beta/streams/${s.id}`);
    const err = await RawClient.connect(`${view.url}/rtc?access_token=${view.token}&auto_subscribe=1&protocol=16`).then(
      (c) => {
        c.close();
        return { status: 0 };
      },
      (e: { status?: number }) => e,
    );
    expect(err.status).toBe(404);
  });
});

describe('viewers in the room', () => {
  test('a viewer receives what a native publisher sends, the frames the stream stores', async () => {
    const s = await create();
    const viewer = new Viewer();
    const pub = new PatternPublisher(5000);
    try {
      await viewer.connect(await viewOf(s.id));
      const trackSid = await pub.start(s.publish);
      await viewer.until(() => viewer.trackSid === trackSid && viewer.decoded().length >= 5, 20_000, '5 decoded frames of the publication');
      expect(viewer.publisherIdentity).toBe(`publisher-${s.id}`);
      expect(viewer.size).toEqual([320, 240]);
      const seen = viewer.decoded();
      for (let i = 1; i < seen.length; i++) expect(seen[i]!).toBeGreaterThan(seen[i - 1]!);
      expect(seen[0]!).toBeGreaterThanOrEqual(5000);
      expect(seen.at(-1)!).toBeLessThan(5000 + pub.captured);
      expect(emu.emulator.room.stats(s.id)).toMatchObject({ publishers: 1, subscribers: 1, width: 320, height: 240 });
      const stream = (await http(emu.url, 'GET', `/v1beta/streams/${s.id}`)).body as { last_frame_index: number | null };
      expect(stream.last_frame_index).not.toBeNull();
    } finally {
      await Promise.all([viewer.close(), pub.close()].map((p) => p.catch(() => undefined)));
    }
  }, 90_000);

  test('viewers receive the synthetic test pattern (joined before and after it starts), then the client camera that replaces it', async () => {
    const s = await create();
    const early = new Viewer();
    const late = new Viewer();
    const pub = new PatternPublisher(90_000);
    try {
      // The room exists (made by this join) before the pattern starts.
      await early.connect(await viewOf(s.id));
      expect(early.trackSid).toBeUndefined();
      expect((await startPattern(s.id)).status).toBe(201);
      await early.until(() => early.decoded().length >= 5, 20_000, '5 decoded pattern frames');
      expect(early.publisherIdentity).toBe(SYNTHETIC_IDENTITY);
      expect(early.size).toEqual([320, 240]);
      const seen = early.decoded();
      for (let i = 1; i < seen.length; i++) expect(seen[i]!).toBeGreaterThan(seen[i - 1]!);

      // The indices a viewer decodes are the stream's lifetime indices: the model reads the same.
      const index = seen.at(-1)!;
      await deadline(
        until(
          async () =>
            ((await http(emu.url, 'GET', `/v1beta/streams/${s.id}`)).body as { last_frame_index: number | null }).last_frame_index! >=
            index,
        ),
        10_000,
        `frame ${index} stored`,
      );
      expect(await modelSees(s.id, index)).toBe(`${index}..${index}`);

      // A viewer joining while the pattern is live gets it at once.
      await late.connect(await viewOf(s.id));
      await late.until(() => late.decoded().length >= 3, 20_000, '3 decoded pattern frames');
      expect(late.publisherIdentity).toBe(SYNTHETIC_IDENTITY);
      expect(late.decoded()[0]!).toBeGreaterThan(index);
      expect(emu.emulator.room.stats(s.id)).toMatchObject({ publishers: 0, subscribers: 2 });

      // The client's camera replaces the pattern (which stops) on the viewers' same connections.
      const trackSid = await pub.start(s.publish);
      for (const v of [early, late]) {
        await v.until(() => v.trackSid === trackSid && v.decoded().length >= 3, 20_000, 'the camera after the pattern');
        expect(v.publisherIdentity).toBe(`publisher-${s.id}`);
        expect(v.decoded()[0]!).toBeGreaterThanOrEqual(90_000);
      }
      expect(emu.emulator.publishers.isRunning(s.id)).toBe(false);
      await deadline(
        until(() => !early.room.remoteParticipants.has(SYNTHETIC_IDENTITY)),
        10_000,
        'the pattern participant left',
      );
      expect([...early.room.remoteParticipants.keys()].sort()).toEqual([`publisher-${s.id}`, late.room.localParticipant!.identity].sort());
    } finally {
      await Promise.all([early.close(), late.close(), pub.close()].map((p) => p.catch(() => undefined)));
    }
  }, 120_000);

  test('a room made by a viewer joining a stream whose pattern already runs shows the pattern', async () => {
    const s = await create();
    const viewer = new Viewer();
    try {
      expect((await startPattern(s.id)).status).toBe(201);
      await viewer.connect(await viewOf(s.id));
      await viewer.until(() => viewer.decoded().length >= 3, 20_000, '3 decoded pattern frames');
      expect(viewer.publisherIdentity).toBe(SYNTHETIC_IDENTITY);
      // Stopping the pattern takes its participant out of the room.
      const left = new Promise<string>((resolve) => viewer.room.once(rtc.RoomEvent.ParticipantDisconnected, (p) => resolve(p.identity)));
      expect((await http(emu.url, 'DELETE', `/_emulator/streams/${s.id}/publisher`)).status).toBe(200);
      expect(await deadline(left, 10_000, 'the pattern participant left')).toBe(SYNTHETIC_IDENTITY);
      expect(viewer.room.isConnected).toBe(true);
    } finally {
      await viewer.close().catch(() => undefined);
    }
  }, 90_000);

  test("a viewer token cannot publish: rtc-node's publishTrack fails, the room answers NOT_ALLOWED, the stream gets nothing", async () => {
    const s = await create();
    const room = new rtc.Room();
    const source = new rtc.VideoSource(160, 120);
    const clients: RawClient[] = [];
    try {
      const mine = await viewOf(s.id);
      await room.connect(mine.url, mine.token, { autoSubscribe: false, dynacast: false });
      const track = rtc.LocalVideoTrack.createVideoTrack('camera', source);
      await expect(
        deadline(
          room.localParticipant!.publishTrack(track, new rtc.TrackPublishOptions({ source: rtc.TrackSource.SOURCE_CAMERA })),
          30_000,
          'publishTrack',
        ),
      ).rejects.toThrow(/track publication timed out, no response received from the server/); // rtc-node ignores ↓ requestResponse and gives up after its 10 s publish timeout

      // At protocol level: ↑ addTrack is answered ↓ requestResponse NOT_ALLOWED, never trackPublished.
      const view = await viewOf(s.id);
      const raw = await RawClient.connect(`${view.url}/rtc?access_token=${view.token}&auto_subscribe=1&protocol=16`);
      clients.push(raw);
      const join = await raw.next('join');
      expect(join.participant?.permission).toMatchObject({ canPublish: false, canSubscribe: true, canPublishData: false });
      raw.send({ case: 'addTrack', value: { cid: 'cam', type: TrackType.VIDEO, source: TrackSource.CAMERA, width: 160, height: 120 } });
      const refused = await raw.next('requestResponse');
      expect(refused).toMatchObject({ reason: RequestResponse_Reason.NOT_ALLOWED, message: 'not allowed to publish' });
      expect(refused.request).toMatchObject({ case: 'addTrack', value: { cid: 'cam' } });
      expect(raw.messages.some((m) => m.case === 'trackPublished')).toBe(false);
      expect(emu.emulator.room.stats(s.id)).toMatchObject({ publishers: 0, framesIn: 0 });
      const stream = (await http(emu.url, 'GET', `/v1beta/streams/${s.id}`)).body as { last_frame_index: number | null };
      expect(stream.last_frame_index).toBeNull();
    } finally {
      for (const c of clients) c.close();
      await room.disconnect().catch(() => undefined);
      await source.close().catch(() => undefined);
    }
  }, 90_000);
});

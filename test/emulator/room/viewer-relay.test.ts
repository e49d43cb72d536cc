/**
 * @jest-environment ./test/media-environment.js
 *
 * A viewer of a legacy webrtc stream: the gateway's relay publishes the client's video into the
 * upstream stream's room (a publisher like any client), and a stock rtc-node participant joined with
 * that stream's viewer token receives it.
 */
import * as rtc from '@livekit/rtc-node';
import { SYNTHETIC_IDENTITY } from '../../../src/emulator/app';
import { KEY, frameBody, http, startStack } from '../../helpers/stack';
import type { Stack } from '../../helpers/stack';
import { deadline } from '../../helpers/time';
import { startWebrtcSender } from '../../helpers/wrtc-sender';
import type { WebrtcSender } from '../../helpers/wrtc-sender';

let stack: Stack;

beforeAll(async () => {
  stack = await startStack();
});

afterAll(async () => {
  await stack?.close();
  await rtc.dispose();
});

test("a viewer token's holder receives the video the gateway relays from a legacy webrtc client", async () => {
  let sender: WebrtcSender | undefined;
  const viewer = new rtc.Room();
  const lumas: number[] = [];
  let reader: ReadableStreamDefaultReader<rtc.VideoFrameEvent> | undefined;
  try {
    sender = await startWebrtcSender({ width: 160, height: 120, fps: 10 });
    const created = await http(stack.url, 'POST', '/v0.2/streams', {
      body: { source: { type: 'webrtc', sdp: sender.offer }, ...frameBody({ interval_seconds: 0.2 }) },
    });
    expect(created.status).toBe(201);
    const { stream_id: id, webrtc } = created.body as { stream_id: string; webrtc: { sdp: string } };
    await sender.answer(webrtc.sdp);

    // The legacy stream's id is its upstream stream's; the client's key owns both.
    const r = await http(stack.emulator.url, 'POST', `/v1beta/streams/${id}/viewer-token`, { key: KEY });
    expect(r.status).toBe(200);
    const { view } = r.body as { view: { url: string; token: string } };

    const relayed = new Promise<string>((resolve) => {
      viewer.on(rtc.RoomEvent.TrackSubscribed, (track, _publication, participant) => {
        // The synthetic pattern shows until the relay's publication replaces it.
        if (track.kind !== rtc.TrackKind.KIND_VIDEO || participant.identity === SYNTHETIC_IDENTITY) return;
        void reader?.cancel().catch(() => undefined);
        const mine = new rtc.VideoStream(track).getReader();
        reader = mine;
        void (async () => {
          for (;;) {
            const next = await mine.read().catch(() => ({ done: true as const, value: undefined }));
            if (next.done || !next.value) return;
            const frame = next.value.frame.convert(rtc.VideoBufferType.I420);
            const n = frame.width * frame.height;
            let sum = 0;
            for (let i = 0; i < n; i += 1) sum += frame.data[i]!;
            lumas.push(sum / n);
            if (lumas.length === 3) resolve(participant.identity);
          }
        })();
      });
    });
    await viewer.connect(view.url, view.token, { autoSubscribe: true, dynacast: false });
    expect(await deadline(relayed, 30_000, '3 relayed frames at the viewer')).toBe(`publisher-${id}`);
    // The sender's picture (flat luma that changes every frame), not black, not all the same frame.
    expect(Math.max(...lumas)).toBeGreaterThan(16);
    expect(new Set(lumas.map(Math.round)).size).toBeGreaterThan(1);
    expect((await http(stack.url, 'DELETE', `/v0.2/streams/${id}`)).status).toBe(200);
  } finally {
    await reader?.cancel().catch(() => undefined);
    await viewer.disconnect().catch(() => undefined);
    sender?.close();
  }
}, 90_000);

/**
 * @jest-environment ./test/media-environment.js
 *
 * The end of a drain, on real processes (redis-server, the emulator, replicas A and B in relay mode,
 * `LEGACY_WEBRTC_MODE=relay`; a webrtc client from @roamhq/wrtc in this process). A SIGTERM'd
 * replica holding results sockets and a webrtc relay keeps them until the drain deadline (`DRAIN_TIMEOUT_MS`, short here); at the
 * deadline what it still holds is handed over or ended as at any shutdown, one log line per stream:
 * its sockets of streams that live on close 1012 `service_restart` (clients reconnect elsewhere),
 * the webrtc stream whose relay it holds ends `server_shutdown` everywhere (its sockets on A too),
 * and it exits 0 leaving nothing behind (slots, upstream streams, relays). A second signal means
 * "now": the same steps at once, long before the deadline.
 */
import { createStream } from '../../helpers/fleet';
import { openResults } from '../../helpers/results-socket';
import { startWebrtcSender } from '../../helpers/wrtc-sender';
import type { WebrtcSender } from '../../helpers/wrtc-sender';
import { KEY, deadline, frameBody, http, ownerOf, resultsAfter, slotsOfKey, until, useFleet } from './fleet-test';

const INTERVAL_S = 0.5;
const DRAIN_MS = 6000;

async function native(url: string, publish: (id: string) => Promise<void>): Promise<string> {
  const c = await createStream(url, KEY, frameBody({ interval_seconds: INTERVAL_S }));
  expect(c.status).toBe(201);
  await publish(c.id!);
  return c.id!;
}

describe('drain deadline', () => {
  const fleet = useFleet({ ids: ['A', 'B'], env: { DRAIN_TIMEOUT_MS: String(DRAIN_MS), LEGACY_WEBRTC_MODE: 'relay' }, publisher: false });
  let sender: WebrtcSender | undefined;
  afterAll(() => sender?.close());

  test('at the deadline: sockets of live streams close 1012, the relayed webrtc stream ends server_shutdown, the replica exits 0 leaving nothing behind', async () => {
    const [a, b] = [fleet().replica('A'), fleet().replica('B')];
    const publish = (id: string) => fleet().publish(id);
    const n1 = await native(a.url, publish);
    const n2 = await native(b.url, publish);
    sender = await startWebrtcSender();
    const w = await createStream(a.url, KEY, {
      source: { type: 'webrtc', sdp: sender.offer },
      ...frameBody({ interval_seconds: INTERVAL_S }),
    });
    expect(w.status).toBe(201);
    await sender.answer((w.body as { webrtc: { sdp: string } }).webrtc.sdp);
    const wId = w.id!;

    // On A: a socket of a stream A schedules, one of a stream B schedules, one of the webrtc stream
    // (ended by A itself at the deadline). On B: the webrtc stream's socket (its relay is on A) and a
    // second socket of n1.
    const s1 = await openResults(a.url, n1, KEY, { waitMs: null });
    const s2 = await openResults(a.url, n2, KEY, { waitMs: null });
    const swa = await openResults(a.url, wId, KEY, { waitMs: null });
    const sw = await openResults(b.url, wId, KEY, { waitMs: null });
    const s1b = await openResults(b.url, n1, KEY, { waitMs: null });
    await deadline(Promise.all([s1, s2, swa, sw, s1b].map((s) => s.waitFor(2))), 30_000, 'first results');

    const termAt = Date.now();
    a.kill('SIGTERM');
    // Draining: every socket, A's included, keeps receiving; the relay keeps relaying. Read so that
    // it holds however late a loaded machine looks (the deadline may have passed by then): results
    // on A's sockets after the SIGTERM came before their close, and the upstream stream keeps the
    // time of the last frame the relay sent it, ended or not.
    await deadline(Promise.all([s1, s2, swa, sw, s1b].map((s) => resultsAfter(s, termAt, 2))), 30_000, 'results during the drain');
    const lastFrameAt = async () =>
      ((await http(fleet().emulatorUrl, 'GET', `/v1beta/streams/${wId}`)).body as { last_frame_at_ms: number | null }).last_frame_at_ms ??
      0;
    await deadline(
      until(async () => (await lastFrameAt()) > termAt),
      30_000,
      'a frame relayed during the drain',
    );

    const exit = await deadline(a.proc.exited, 60_000, 'A exits at the drain deadline');
    expect(exit.code).toBe(0);
    // It held its connections until the deadline, not merely until some moment this test looked.
    expect(Date.now() - termAt).toBeGreaterThanOrEqual(DRAIN_MS);
    expect(await deadline(s1.closed, 10_000, 's1 closed')).toEqual({ code: 1012, reason: 'service_restart' });
    expect(await deadline(s2.closed, 10_000, 's2 closed')).toEqual({ code: 1012, reason: 'service_restart' });
    // A's own socket of the stream A ended says it ended (not 1012: a reconnect would find it gone).
    expect(await deadline(swa.closed, 10_000, 'swa closed')).toEqual({ code: 1001, reason: 'server_shutdown' });
    expect(await deadline(sw.closed, 10_000, 'sw closed')).toEqual({ code: 1001, reason: 'server_shutdown' });
    expect(await fleet().session(wId)).toMatchObject({ state: 'ended', endReason: 'server_shutdown' });
    // One line per stream A still held at the deadline.
    const deadlineLines = a.lines.filter((l) => Date.parse(String(l.time)) >= termAt && /drain deadline/i.test(String(l.msg)));
    expect(deadlineLines.map((l) => l.streamId)).toContain(wId);

    // The native streams go on, scheduled by B; nothing of the ended one is left.
    expect(s1b.isOpen()).toBe(true);
    await deadline(resultsAfter(s1b, Date.now(), 2), 30_000, 'n1 goes on after A exited');
    for (const id of [n1, n2]) expect(await ownerOf(fleet(), id)).toBe('B');
    const upstream = await fleet().upstreamStreams();
    expect(upstream.map((u) => u.id).sort()).toEqual([n1, n2].sort());
    expect(await slotsOfKey(fleet())).toBe(2);
    for (const id of [n1, n2]) expect((await http(b.url, 'DELETE', `/v0.2/streams/${id}`)).status).toBe(200);
    await deadline(
      until(async () => (await slotsOfKey(fleet())) === 0),
      30_000,
      'slots released',
    );
  }, 180_000);
});

describe('second signal', () => {
  const fleet = useFleet({ ids: ['A', 'B'], env: { DRAIN_TIMEOUT_MS: '3600000' } });

  test('a second signal during a drain means now: the socket closes 1012, the stream goes on elsewhere, exit 0', async () => {
    const [a, b] = [fleet().replica('A'), fleet().replica('B')];
    const c = await createStream(a.url, KEY, frameBody({ interval_seconds: INTERVAL_S }));
    expect(c.status).toBe(201);
    const s = await openResults(a.url, c.id!, KEY, { waitMs: null });
    await deadline(s.waitFor(2), 30_000, 'first results');
    const termAt = Date.now();
    a.kill('SIGTERM');
    await deadline(resultsAfter(s, termAt, 3), 30_000, 'results during the drain');
    expect(a.running()).toBe(true);

    a.kill('SIGINT');
    expect(await deadline(a.proc.exited, 30_000, 'A exits on the second signal')).toMatchObject({ code: 0 });
    expect(await deadline(s.closed, 10_000, 'the socket closed')).toEqual({ code: 1012, reason: 'service_restart' });
    expect(await ownerOf(fleet(), c.id!)).toBe('B');
    const again = await openResults(b.url, c.id!, KEY, { waitMs: null });
    await deadline(again.waitFor(2), 30_000, 'the stream goes on on B');
    expect((await http(b.url, 'DELETE', `/v0.2/streams/${c.id}`)).status).toBe(200);
  }, 120_000);
});

/**
 * @jest-environment ./test/media-environment.js
 *
 * A webrtc stream over WHIP is not pinned, on real processes (redis-server, the emulator, replicas
 * A, B and C; a wrtc client in this process that never trickles): its media goes from the client
 * to the emulator's room, so no replica maps a WebRTC library or holds a UDP socket. SIGKILL of its
 * owner: a survivor adopts it and its results go on, on the same socket, with the same WHIP session
 * in the room; a drain hands it over the same way. When the client goes, the replica that owns it
 * then ends it `webrtc_disconnected` and the WHIP session is DELETEd; nothing is left behind.
 */
import { createStream } from '../../helpers/fleet';
import { mediaLibrariesMapped, udpSockets } from '../../helpers/process-footprint';
import { openResults } from '../../helpers/results-socket';
import { startWebrtcSender } from '../../helpers/wrtc-sender';
import type { WebrtcSender } from '../../helpers/wrtc-sender';
import { KEY, deadline, frameBody, http, ownerOf, resultsAfter, slotsOfKey, until, useFleet } from './fleet-test';

const INTERVAL_S = 0.5;

interface EmulatorState {
  streams: { id: string; last_frame_index: number | null; room_publication: { identity: string; trackSid: string } | null }[];
  whip_sessions: number;
}

describe('webrtc over WHIP in a fleet', () => {
  const fleet = useFleet({ ids: ['A', 'B', 'C'], publisher: false });
  let sender: WebrtcSender | undefined;
  const afterEnd: (() => void)[] = [];
  afterAll(() => {
    sender?.close();
    for (const f of afterEnd) f();
  });

  const emulatorState = async () => (await http(fleet().emulatorUrl, 'GET', '/_emulator/state')).body as EmulatorState;
  const upstreamOf = async (id: string) => (await emulatorState()).streams.find((s) => s.id === id);

  test('SIGKILL of the owner and a drain move it, with its WHIP session, no socket closed; the client going away ends it; no replica touches media', async () => {
    const [a, b] = [fleet().replica('A'), fleet().replica('B')];
    sender = await startWebrtcSender({ fps: 10 });
    const created = await createStream(a.url, KEY, {
      ...frameBody({ interval_seconds: INTERVAL_S }),
      source: { type: 'webrtc', sdp: sender.offer },
    });
    expect(created.status).toBe(201);
    const id = created.id!;
    await sender.answer((created.body as { webrtc: { sdp: string } }).webrtc.sdp);
    // Keepalives as a legacy client sends them, to whichever replica is up (each renews the record's token).
    const keepalives = setInterval(() => {
      const up = fleet().replicas.find((r) => r.running() && r.id !== 'A');
      if (up) void http(up.url, 'POST', `/v0.2/streams/${id}/keepalive`).catch(() => undefined);
    }, 5000);
    afterEnd.push(() => clearInterval(keepalives));
    const socket = await openResults(b.url, id, KEY, { waitMs: null });
    await deadline(socket.waitFor(2), 30_000, 'first results');
    const publication = (await upstreamOf(id))!.room_publication;
    expect(publication).toMatchObject({ identity: expect.stringContaining(id) });
    expect((await fleet().session(id))?.pinned).toBe(false);

    // The media reaches no replica: no WebRTC library mapped, no UDP socket. (This process, which
    // runs the client, maps wrtc and holds its UDP sockets: the reading sees them where they are.)
    expect(mediaLibrariesMapped(process.pid).length).toBeGreaterThan(0);
    expect(udpSockets(process.pid)).toBeGreaterThan(0);
    for (const r of fleet().replicas) {
      expect({ replica: r.id, libraries: mediaLibrariesMapped(r.proc.child.pid!), udp: udpSockets(r.proc.child.pid!) }).toEqual({
        replica: r.id,
        libraries: [],
        udp: 0,
      });
    }

    // SIGKILL of the owner: a survivor adopts the stream; the socket on B never closes.
    expect(await ownerOf(fleet(), id)).toBe('A');
    const killedAt = Date.now();
    a.kill('SIGKILL');
    await deadline(resultsAfter(socket, killedAt, 3), 60_000, 'results after the SIGKILL');
    const adopter = await ownerOf(fleet(), id);
    expect(['B', 'C']).toContain(adopter);
    const frames = (await upstreamOf(id))!.last_frame_index!;
    await deadline(
      until(async () => ((await upstreamOf(id))?.last_frame_index ?? 0) > frames + 10),
      30_000,
      'frames keep reaching the room',
    );
    // The same WHIP participant and track: the media never moved.
    expect((await upstreamOf(id))!.room_publication).toEqual(publication);

    // A drain hands it over too (a webrtc stream no longer holds a replica). The socket stays where
    // it is: a drained replica keeps the results sockets it holds until they end.
    const drainedAt = Date.now();
    const drained = fleet().replica(adopter);
    drained.kill('SIGTERM');
    const last = adopter === 'B' ? 'C' : 'B';
    await deadline(resultsAfter(socket, drainedAt, 3), 60_000, 'results after the drain');
    expect(await ownerOf(fleet(), id)).toBe(last);
    expect((await upstreamOf(id))!.room_publication).toEqual(publication);
    expect((await fleet().session(id))?.state).toBe('active');

    // The client goes away: its frames stop upstream, and the owner ends the stream for it.
    sender.close();
    expect(await deadline(socket.closed, 60_000, 'the stream ends')).toEqual({ code: 1001, reason: 'webrtc_disconnected' });
    expect(await fleet().session(id)).toMatchObject({ state: 'ended', endReason: 'webrtc_disconnected' });
    // Its owner DELETEd the WHIP session (with the record's latest token) before the upstream stream
    // (the replica writes its log in chunks: wait for the line).
    const ended = () =>
      fleet()
        .replica(last)
        .lines.filter((l) => l.streamId === id && String(l.msg).startsWith('WHIP session'));
    await deadline(
      until(() => ended().length > 0),
      10_000,
      'the WHIP session ended',
    );
    expect(ended()).toEqual([expect.objectContaining({ msg: 'WHIP session ended', ended: true })]);
    await deadline(
      until(async () => (await slotsOfKey(fleet())) === 0),
      30_000,
      'the slot is released',
    );
    const state = await emulatorState();
    expect(state.streams.map((s) => s.id)).not.toContain(id);
    expect(state.whip_sessions).toBe(0);
    // The drained replica held the stream's socket at most: it exits once that closed.
    expect(await deadline(drained.proc.exited, 60_000, `${adopter} exits after the drain`)).toMatchObject({ code: 0 });
  }, 240_000);
});

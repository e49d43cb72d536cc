/**
 * @jest-environment ./test/media-environment.js
 *
 * A customer-room stream fails over on real processes (redis-server, the emulator, replicas A and
 * B; an rtc-node camera in this process publishing into the customer's own room): SIGKILL of its
 * owner, and the survivor adopts it, joins the customer's room again with the token kept (sealed)
 * in the record, and its results go on with new frames, on the same socket.
 */
import * as rtc from '@livekit/rtc-node';
import { PatternCamera } from '../../helpers/pattern-camera';
import { openResults } from '../../helpers/results-socket';
import { KEY, KEY_B, deadline, frameBody, http, ownerOf, resultsAfter, tail, until, useFleet } from './fleet-test';

const fleet = useFleet({ ids: ['A', 'B'], publisher: false });
let camera: PatternCamera | undefined;
afterAll(async () => {
  await camera?.close();
  await rtc.dispose();
}, 30_000);

/** The pattern index of a result's newest frame (the camera paints its frame count). */
const patternOf = (message: Record<string, unknown>) => tail(String(message.result)).pattern?.[1] ?? -1;

test("SIGKILL of a room stream's owner: the survivor rejoins the customer's room and its results go on, with new frames", async () => {
  const [a, b] = [fleet().replica('A'), fleet().replica('B')];
  // The customer's room: another account's stream there, a camera publishing in it, and a
  // subscribe token for the gateway (the contract's viewer token).
  const own = await http(fleet().emulatorUrl, 'POST', '/v1beta/streams', { key: KEY_B, body: {} });
  const room = own.body as { id: string; publish: { url: string; token: string } };
  camera = new PatternCamera(0);
  await camera.start(room.publish.url, room.publish.token);
  const viewer = await http(fleet().emulatorUrl, 'POST', `/v1beta/streams/${room.id}/viewer-token`, { key: KEY_B, body: {} });
  const view = (viewer.body as { view: { url: string; token: string } }).view;

  const created = await http(a.url, 'POST', '/v0.2/streams', {
    body: { ...frameBody({ interval_seconds: 0.5 }), source: { type: 'room', url: view.url, token: view.token } },
  });
  expect(created.status).toBe(201);
  const id = (created.body as { stream_id: string }).stream_id;
  expect(await ownerOf(fleet(), id)).toBe('A');
  expect((await fleet().session(id))?.pinned).toBe(false);
  const socket = await openResults(b.url, id, KEY, { waitMs: null });
  await deadline(resultsAfter(socket, 0, 2), 30_000, 'first results');
  const before = Math.max(...socket.received.filter((r) => r.message.ok === true).map((r) => patternOf(r.message)));
  expect(before).toBeGreaterThanOrEqual(0);

  // The camera's next frame number: a result showing it or a later one read a frame painted after
  // the kill (the upstream's buffer holds frames newer than the last result's until then).
  const after = camera.next;
  const killedAt = Date.now();
  a.kill('SIGKILL');
  const fresh = () => socket.received.filter((r) => r.atMs > killedAt && r.message.ok === true && patternOf(r.message) >= after);
  await deadline(
    until(() => {
      if (!socket.isOpen()) throw new Error('the results socket closed during the failover');
      return fresh().length >= 2;
    }),
    60_000,
    'results with new frames after the owner died',
  );
  expect(socket.isOpen()).toBe(true);
  expect(await ownerOf(fleet(), id)).toBe('B');
  console.log(
    `room stream failover: results back ${Math.min(...socket.received.filter((r) => r.atMs > killedAt).map((r) => r.atMs)) - killedAt} ms after SIGKILL`,
  );

  expect((await http(b.url, 'DELETE', `/v0.2/streams/${id}`)).status).toBe(200);
  await deadline(socket.closed, 10_000, 'socket closed');
}, 120_000);

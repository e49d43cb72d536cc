/**
 * A clean stop, the way browser SDK 2.x's stop() does it (spec/legacy-clients.md): DELETE the
 * stream, await the answer, then close its own results socket. The DELETE's answer comes first and
 * the server's 1001 only after `legacy.stopGraceMs`, so the SDK's socket closes from its side (1000)
 * and no server close reaches it while it still counts itself running; the stream's other sockets
 * still get 1001 `client_requested`. Asserted by the close code each side saw (order of events).
 */
import { KEY, frameBody, http, startStack } from '../../helpers/stack';
import { openResults } from '../../helpers/results-socket';
import type { Stack } from '../../helpers/stack';

let s: Stack;

beforeAll(async () => {
  // A grace far above a client's own reaction time on a loaded machine: the order is what is asserted.
  s = await startStack({ legacy: { stopGraceMs: 5000 } });
});

afterAll(async () => {
  await s.close();
});

test("DELETE, then the client's own close: its socket sees no server close; another socket of the stream gets 1001 client_requested", async () => {
  const created = await http(s.url, 'POST', '/v0.2/streams', { body: frameBody({ interval_seconds: 0.5 }) });
  expect(created.status).toBe(201);
  const id = (created.body as { stream_id: string }).stream_id;
  const sdk = await openResults(s.url, id, KEY);
  const other = await openResults(s.url, id, KEY);
  await sdk.waitFor(1);

  const answer = await http(s.url, 'DELETE', `/v0.2/streams/${id}`);
  expect(answer).toMatchObject({ status: 200, body: { status: 'ok' } });
  // The server has not closed the SDK's socket while the DELETE was answered.
  expect(sdk.ws.readyState).toBe(sdk.ws.OPEN);
  sdk.ws.close(1000, 'stopped');

  expect(await sdk.closed).toEqual({ code: 1000, reason: 'stopped' });
  expect(await other.closed).toEqual({ code: 1001, reason: 'client_requested' });
  // Ended once, as the client asked.
  expect((await http(s.url, 'DELETE', `/v0.2/streams/${id}`)).status).toBe(204);
});

/**
 * The provider's profile (config/overshoot.json) end to end on real sockets, gateway and emulator
 * alike: keys `ovs-…`, references `ovs://…`, backends `overshoot` and `gemini`, the `livekit` room
 * fields, the completion's `overshoot` field and `X-Overshoot-Region`; the seed profile's tokens are
 * refused there.
 */
import fs from 'node:fs';
import path from 'node:path';
import { clipBody, frameBody, http, reinfer, startStack, tail } from '../../helpers/stack';
import { openResults } from '../../helpers/results-socket';
import type { Stack } from '../../helpers/stack';

const PROFILE = JSON.parse(fs.readFileSync(path.join(__dirname, '../../../config/overshoot.json'), 'utf8')) as Record<string, unknown>;
const KEY = 'ovs-local-dev';

let s: Stack;
beforeAll(async () => {
  s = await startStack(PROFILE);
});
afterAll(async () => {
  await s.close();
});

test('the shipped profile names the provider tokens', () => {
  expect(PROFILE).toEqual({ brand: 'overshoot', brandAbbreviation: 'ovs', thirdPartyBackend: 'gemini', roomVendor: 'livekit' });
  expect(s.cfg.emulator.accounts.flatMap((a) => a.keys.map((k) => k.key))).toContain(KEY);
});

test('backends overshoot (the default) and gemini deliver results; thirdparty is refused', async () => {
  for (const backend of ['overshoot', 'gemini', undefined]) {
    const created = await http(s.url, 'POST', '/v0.2/streams', {
      key: KEY,
      body: frameBody({ interval_seconds: 0.3 }, backend ? { backend } : {}),
    });
    expect(created.status).toBe(201);
    const body = created.body as Record<string, unknown>;
    expect(Object.keys(body).sort()).toEqual(['lease', 'livekit', 'stream_id', 'turn_servers', 'webrtc']);
    const id = body.stream_id as string;
    const sock = await openResults(s.url, id, KEY);
    const [r] = await sock.waitFor(1, 15_000);
    expect(r).toMatchObject({ ok: true, model_backend: backend ?? 'overshoot' });
    // The emulator resolved the gateway's ovs:// reference to real frames.
    expect(tail(r!.result as string).frames).toBe(1);
    const ka = await http(s.url, 'POST', `/v0.2/streams/${id}/keepalive`, { key: KEY });
    expect(ka.status).toBe(200);
    expect(ka.body).toHaveProperty('livekit_token');
    expect((await http(s.url, 'DELETE', `/v0.2/streams/${id}`, { key: KEY })).status).toBe(200);
  }
  const refused = await http(s.url, 'POST', '/v0.2/streams', { key: KEY, body: frameBody({}, { backend: 'thirdparty' }) });
  expect(refused.status).toBe(422);
  expect(refused.body).toMatchObject({
    details: [{ loc: ['body', 'inference', 'backend'], msg: "Input should be 'gemini' or 'overshoot'" }],
  });
});

test('the seed tokens are refused: an svc- key before the upstream is asked, an svc:// reference by the emulator', async () => {
  expect((await http(s.url, 'POST', '/v0.2/streams', { key: 'svc-local-dev', body: clipBody() })).status).toBe(401);
  const created = await http(s.url, 'POST', '/v1beta/streams', { key: KEY, body: {} });
  const id = (created.body as { id: string }).id;
  const ask = (scheme: string) =>
    http(s.url, 'POST', '/v1beta/chat/completions', {
      key: KEY,
      body: {
        model: 'local/analyzer',
        thread_id: 'profile-test',
        messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: `${scheme}://streams/${id}?frame_index=-1` } }] }],
      },
    });
  let ok = await ask('ovs');
  for (let i = 0; i < 50 && ok.status === 422; i++) ok = await ask('ovs'); // until the first frame is in
  expect(ok.status).toBe(200);
  expect(ok.body).toMatchObject({ overshoot: { cache: { thread_id: 'profile-test' } } });
  expect(ok.headers.get('x-overshoot-region')).not.toBeNull();
  expect((await ask('svc')).status).toBe(422);
  await http(s.url, 'DELETE', `/v1beta/streams/${id}`, { key: KEY });
});

test('a clip stream as the Python SDK drives it: results, keepalive, reinfer of a delivered result', async () => {
  const created = await http(s.url, 'POST', '/v0.2/streams', {
    key: KEY,
    body: clipBody({ target_fps: 4, clip_length_seconds: 1, delay_seconds: 0.5 }),
  });
  const id = (created.body as { stream_id: string }).stream_id;
  const sock = await openResults(s.url, id, KEY);
  const [first] = await sock.waitFor(2, 15_000);
  expect((await http(s.url, 'POST', `/v0.2/streams/${id}/keepalive`, { key: KEY })).status).toBe(200);
  const again = await reinfer(s.url, { result_id: first!.id, prompt: 'Again?', model: 'local/analyzer' }, KEY);
  expect(again.status).toBe(200);
  expect(again.body).toMatchObject({ model: 'local/analyzer' });
  await http(s.url, 'DELETE', `/v0.2/streams/${id}`, { key: KEY });
  expect(await sock.closed).toEqual({ code: 1001, reason: 'client_requested' });
});

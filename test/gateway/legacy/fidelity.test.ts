/**
 * Result fidelity on real sockets (gateway + emulator): the first clip result is a full clip; fallback is on
 * by default and names the model that answered; a model the gateway sees saturated takes no new
 * streams. 503 bursts come from the emulator's fault control, not from timing.
 */
import { KEY, clipBody, frameBody, http, tail, useStack } from '../../helpers/stack';
import { openResults } from '../../helpers/results-socket';
import type { Stack } from '../../helpers/stack';

const fault = (s: Stack, body: Record<string, unknown>) => http(s.emulator.url, 'POST', '/_emulator/faults', { body });

async function createStream(s: Stack, body: unknown): Promise<string> {
  const res = await http(s.url, 'POST', '/v0.2/streams', { body });
  expect(res.status).toBe(201);
  return (res.body as { stream_id: string }).stream_id;
}

describe('fallback models unset: the upstream ready models, in listed order', () => {
  const stack = useStack();

  test('the first clip result already spans a full clip (no 1-frame, 0 ms "clip")', async () => {
    const s = stack();
    const id = await createStream(s, clipBody({ target_fps: 4, clip_length_seconds: 1, delay_seconds: 0.5 }));
    const sock = await openResults(s.url, id, KEY);
    const [first] = await sock.waitFor(1, 15_000);
    expect(first).toMatchObject({ ok: true, mode: 'clip' });
    const t = tail(first!.result as string);
    // 1 s sampled at 4 fps from a 10 fps source: 4 frames about 750 ms apart end to end.
    expect(t.frames).toBeGreaterThanOrEqual(3);
    expect(t.spanMs).toBeGreaterThanOrEqual(600);
    await http(s.url, 'DELETE', `/v0.2/streams/${id}`);
    await sock.closed;
  });

  test('a 503 burst outlasting 3 attempts falls back to the next ready model; model_name names it', async () => {
    const s = stack();
    const id = await createStream(s, frameBody({ interval_seconds: 0.5 }));
    const sock = await openResults(s.url, id, KEY);
    await sock.waitFor(1);
    await fault(s, { model: 'local/analyzer', count: 3, status: 503 });
    let n = sock.messages.length;
    const [fallback] = (await sock.waitFor(n + 1)).slice(n);
    expect(fallback).toMatchObject({ ok: true, error: null, model_name: 'local/analyzer-mini' });
    // Exactly 3 attempts took the burst: nothing is left armed, and the next tick is the requested model's.
    expect((await http(s.emulator.url, 'GET', '/_emulator/state')).body).toMatchObject({ faults: [] });
    n = sock.messages.length;
    await sock.waitFor(n + 1);
    expect(sock.messages[n]).toMatchObject({ ok: true, model_name: 'local/analyzer' });
    await http(s.url, 'DELETE', `/v0.2/streams/${id}`);
    await sock.closed;
  });
});

describe('fallbackModels: [] (no fallback)', () => {
  const stack = useStack({ legacy: { fallbackModels: [] } });

  test('a burst gives ok:false; a model the gateway then shows saturated rejects new streams (503 model_unavailable)', async () => {
    const s = stack();
    const id = await createStream(s, frameBody({ interval_seconds: 0.3 }, { model: 'local/analyzer-mini' }));
    const sock = await openResults(s.url, id, KEY);
    await sock.waitFor(1);
    await fault(s, { model: 'local/analyzer-mini', count: 3 * 5, status: 503 });
    const n = sock.messages.length;
    const failed = (await sock.waitFor(n + 5)).slice(n);
    expect(failed.every((m) => m.ok === false && m.model_name === 'local/analyzer-mini')).toBe(true);

    const models = (await http(s.url, 'GET', '/v0.2/models')).body as { model: string; status: string; ready: boolean }[];
    expect(models.find((m) => m.model === 'local/analyzer-mini')).toEqual({
      model: 'local/analyzer-mini',
      ready: false,
      status: 'saturated',
    });
    const refused = await http(s.url, 'POST', '/v0.2/streams', { body: frameBody({}, { model: 'local/analyzer-mini' }) });
    expect(refused.status).toBe(503);
    expect(refused.body).toMatchObject({
      error: 'model_unavailable',
      message: expect.stringMatching(/saturated/),
      details: { status: 'saturated' },
    });
    // Another, ready model still takes streams.
    const other = await createStream(s, frameBody({}, { model: 'local/analyzer' }));
    await http(s.url, 'DELETE', `/v0.2/streams/${other}`);
    await http(s.url, 'DELETE', `/v0.2/streams/${id}`);
    await sock.closed;
  });
});

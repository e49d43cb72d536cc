/**
 * Contract tests of the emulator's stream resource (spec/interface.md "Stream", "States and
 * transitions", Authentication, region header, Errors) on a real socket.
 */
import { loadConfig } from '../../src/config';
import { createLogger } from '../../src/lib/logger';
import { startEmulator } from '../../src/emulator/server';
import type { RunningEmulator } from '../../src/emulator/server';
import { http, KEY, KEY_B, KEY_BROKE, KEY_REVOKED } from '../helpers/stack';
import { deadline, until, sleep } from '../helpers/time';
import { testConfig } from '../helpers/config';

const STREAM_FIELDS = [
  'audio',
  'created_at_ms',
  'end_reason',
  'ended_at_ms',
  'evicted_frame_count',
  'expires_at_ms',
  'first_available_frame_at_ms',
  'first_available_frame_index',
  'first_frame_at_ms',
  'id',
  'last_frame_at_ms',
  'last_frame_index',
  'recent_fps',
  'retained_frame_count',
  'state',
  'stream_time_ms',
  'ttl_seconds',
];

const TOMBSTONE_S = 3;

async function start(overrides: Record<string, unknown> = {}): Promise<RunningEmulator> {
  return startEmulator(testConfig({ emulator: overrides }), createLogger('silent'));
}

const create = async (url: string, key = KEY) =>
  (await http(url, 'POST', '/v1beta/streams', { key, body: {} })).body as Record<string, any>;
const publish = (url: string, id: string, body: Record<string, unknown> = { fps: 10, width: 160, height: 120 }) =>
  http(url, 'POST', `/_emulator/streams/${id}/publisher`, { body });

describe('emulator streams', () => {
  let emu: RunningEmulator;
  beforeAll(async () => {
    // A tombstone well past the reads made while it lasts (a loaded machine's pause must not end it
    // between two of them); its end is waited for on the emulator's own timer order.
    emu = await start({ leaseTtlSeconds: 2, tombstoneSeconds: TOMBSTONE_S });
  });
  afterAll(() => emu.close());

  test('create: 201 with publish {type, url, token}; the token is a room JWT for this stream with a publish grant', async () => {
    const r = await http(emu.url, 'POST', '/v1beta/streams', { body: {} });
    expect(r.status).toBe(201);
    const b = r.body as Record<string, any>;
    expect(Object.keys(b).sort()).toEqual(['expires_at_ms', 'id', 'publish', 'state', 'ttl_seconds']);
    expect(b.id).toMatch(/^[0-9a-f-]{36}$/);
    expect(b.state).toBe('active');
    expect(b.ttl_seconds).toBe(2);
    expect(b.expires_at_ms).toBeGreaterThan(Date.now());
    expect(b.publish.type).toBe('room');
    expect(b.publish.url).toBe(emu.url.replace('http', 'ws'));
    const claims = JSON.parse(Buffer.from(String(b.publish.token).split('.')[1]!, 'base64url').toString()) as Record<string, any>;
    expect(claims.video).toMatchObject({ room: b.id, roomJoin: true, canPublish: true });
    expect(claims.exp).toBeGreaterThan(Date.now() / 1000);
  });

  test('rule 1: before the first frame only id, state, created_at_ms, expires_at_ms and ttl_seconds are populated', async () => {
    const { id } = await create(emu.url);
    const r = await http(emu.url, 'GET', `/v1beta/streams/${id}`);
    expect(r.status).toBe(200);
    const s = r.body as Record<string, any>;
    expect(Object.keys(s).sort()).toEqual(STREAM_FIELDS);
    for (const f of [
      'first_frame_at_ms',
      'last_frame_at_ms',
      'last_frame_index',
      'first_available_frame_at_ms',
      'first_available_frame_index',
      'ended_at_ms',
      'end_reason',
    ]) {
      expect([f, s[f]]).toEqual([f, null]);
    }
    expect(s).toMatchObject({
      id,
      state: 'active',
      stream_time_ms: 0,
      recent_fps: 0,
      retained_frame_count: 0,
      evicted_frame_count: 0,
      ttl_seconds: 2,
      audio: false,
    });
    expect(typeof s.created_at_ms).toBe('number');
    expect(typeof s.expires_at_ms).toBe('number');
  });

  test('rules 2, 3, 6: frames give the three axes; stream time grows from the first frame; indices are lifetime indices', async () => {
    const { id } = await create(emu.url);
    expect((await publish(emu.url, id)).status).toBe(201);
    // Kept alive while waiting (the lease is 2 s here): a loaded machine is slow, not wrong.
    const read = async () => {
      await http(emu.url, 'POST', `/v1beta/streams/${id}/keepalive`);
      return (await http(emu.url, 'GET', `/v1beta/streams/${id}`)).body as Record<string, any>;
    };
    let s: Record<string, any> = {};
    await deadline(
      until(async () => ((s = await read()).last_frame_index ?? -1) >= 4, 50),
      10_000,
      'five frames',
    );
    expect(s.first_frame_at_ms).toBeGreaterThanOrEqual(s.created_at_ms);
    expect(s.last_frame_at_ms).toBeGreaterThanOrEqual(s.first_frame_at_ms);
    expect(s.first_available_frame_index).toBe(0);
    expect(s.last_frame_index).toBeGreaterThanOrEqual(4);
    expect(s.retained_frame_count).toBe(s.last_frame_index + 1);
    expect(s.recent_fps).toBeGreaterThan(0);
    expect(s.stream_time_ms).toBeGreaterThanOrEqual(s.last_frame_at_ms - s.first_frame_at_ms);
    await sleep(200);
    const later = await read();
    expect(later.state).toBe('active');
    expect(later.stream_time_ms).toBeGreaterThan(s.stream_time_ms);
    await http(emu.url, 'DELETE', `/v1beta/streams/${id}`);
  });

  test('keepalive renews the lease with a fresh token and the current stream time; an ended stream gives 404', async () => {
    const c = await create(emu.url);
    await sleep(20);
    const ka = await http(emu.url, 'POST', `/v1beta/streams/${c.id}/keepalive`);
    expect(ka.status).toBe(200);
    const k = ka.body as Record<string, any>;
    expect(k.expires_at_ms).toBeGreaterThan(c.expires_at_ms);
    expect(typeof k.publish.token).toBe('string');
    expect(k.stream_time_ms).toBe(0);
    // Empty body with a JSON content type (no content) is accepted too.
    const empty = await fetch(`${emu.url}/v1beta/streams/${c.id}/keepalive`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json', 'content-length': '0' },
    });
    expect(empty.status).toBe(200);
    expect((await http(emu.url, 'DELETE', `/v1beta/streams/${c.id}`)).body).toEqual({ id: c.id, deleted: true });
    const after = await http(emu.url, 'POST', `/v1beta/streams/${c.id}/keepalive`);
    expect(after.status).toBe(404);
    expect(after.body).toMatchObject({ detail: { error: { type: 'stream_error', code: 'stream_not_found' } } });
  });

  test('lease expiry → ended/expired with a snapshot; then the tombstone window; then 404', async () => {
    const { id } = await create(emu.url);
    await publish(emu.url, id);
    await sleep(600);
    // Stop publishing so the snapshot can be compared with the last live values.
    await http(emu.url, 'DELETE', `/_emulator/streams/${id}/publisher`);
    const live = (await http(emu.url, 'GET', `/v1beta/streams/${id}`)).body as Record<string, any>;
    await sleep(2000 - (Date.now() - live.created_at_ms) + 150);
    const ended = (await http(emu.url, 'GET', `/v1beta/streams/${id}`)).body as Record<string, any>;
    expect(ended).toMatchObject({
      state: 'ended',
      end_reason: 'expired',
      expires_at_ms: null,
      last_frame_index: live.last_frame_index,
      last_frame_at_ms: live.last_frame_at_ms,
      first_frame_at_ms: live.first_frame_at_ms,
      retained_frame_count: live.retained_frame_count,
    });
    expect(ended.ended_at_ms).toBeGreaterThanOrEqual(live.created_at_ms + 2000);
    // The snapshot does not move.
    await sleep(200);
    expect((await http(emu.url, 'GET', `/v1beta/streams/${id}`)).body).toEqual(ended);
    // Past the tombstone: its timer (armed at the end, in this process) fires before this later one.
    await sleep(ended.ended_at_ms + TOMBSTONE_S * 1000 + 100 - Date.now());
    expect((await http(emu.url, 'GET', `/v1beta/streams/${id}`)).status).toBe(404);
  });

  test('delete: ended/deleted, frames dropped, idempotent within the tombstone window, no longer referenceable', async () => {
    const { id } = await create(emu.url);
    await publish(emu.url, id);
    await sleep(400);
    expect((await http(emu.url, 'DELETE', `/v1beta/streams/${id}`)).status).toBe(200);
    const s = (await http(emu.url, 'GET', `/v1beta/streams/${id}`)).body as Record<string, any>;
    expect(s).toMatchObject({ state: 'ended', end_reason: 'deleted', expires_at_ms: null });
    expect(s.last_frame_index).not.toBeNull();
    const again = await http(emu.url, 'DELETE', `/v1beta/streams/${id}`);
    expect(again.status).toBe(200);
    const ref = await http(emu.url, 'POST', '/v1beta/chat/completions', {
      body: {
        model: 'local/analyzer',
        messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: `svc://streams/${id}?frame_index=-1` } }] }],
      },
    });
    expect(ref.status).toBe(404);
    expect(ref.body).toMatchObject({ detail: { error: { code: 'stream_not_found' } } });
  });

  test('authentication: 401 missing/unknown/revoked, 403 for another account, 402 create without credits', async () => {
    const { id } = await create(emu.url);
    expect((await http(emu.url, 'GET', `/v1beta/streams/${id}`, { key: null })).status).toBe(401);
    expect((await http(emu.url, 'GET', `/v1beta/streams/${id}`, { key: 'svc-unknown' })).status).toBe(401);
    const revoked = await http(emu.url, 'GET', `/v1beta/streams/${id}`, { key: KEY_REVOKED });
    expect(revoked.status).toBe(401);
    expect(revoked.body).toEqual({ detail: expect.any(String) });
    expect((await http(emu.url, 'GET', `/v1beta/streams/${id}`, { key: KEY_B })).status).toBe(403);
    expect((await http(emu.url, 'DELETE', `/v1beta/streams/${id}`, { key: KEY_B })).status).toBe(403);
    expect((await http(emu.url, 'POST', `/v1beta/streams/${id}/keepalive`, { key: KEY_B })).status).toBe(403);
    const broke = await http(emu.url, 'POST', '/v1beta/streams', { key: KEY_BROKE, body: {} });
    expect(broke.status).toBe(402);
    // The stream shape's type is stream_error everywhere (contract, Errors), on create too.
    expect(broke.body).toEqual({ detail: { error: { message: expect.any(String), type: 'stream_error', code: 'billing_denied' } } });
    // Model list and pricing need no key.
    expect((await http(emu.url, 'GET', '/v1beta/models', { key: null })).status).toBe(200);
    expect((await http(emu.url, 'GET', '/billing/pricing/local/analyzer', { key: null })).status).toBe(200);
  });

  test('unknown and malformed stream ids: 404 stream_not_found, 422 validation', async () => {
    const unknown = await http(emu.url, 'GET', '/v1beta/streams/00000000-0000-4000-8000-000000000000');
    expect(unknown.status).toBe(404);
    expect(unknown.body).toMatchObject({
      detail: { error: { message: expect.any(String), type: 'stream_error', code: 'stream_not_found' } },
    });
    const bad = await http(emu.url, 'GET', '/v1beta/streams/not-a-uuid');
    expect(bad.status).toBe(422);
    expect(bad.body).toMatchObject({
      error: 'validation_error',
      details: [{ loc: ['path', 'stream_id'], msg: expect.any(String), type: expect.any(String) }],
    });
  });

  test('region header: honoured and echoed; another region 409 region_error', async () => {
    const ok = await fetch(`${emu.url}/v1beta/streams`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json', 'X-Svc-Region': 'us-west1' },
      body: '{}',
    });
    expect(ok.status).toBe(201);
    expect(ok.headers.get('x-svc-region')).toBe('us-west1');
    const wrong = await fetch(`${emu.url}/v1beta/streams`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json', 'X-Svc-Region': 'us-central1' },
      body: '{}',
    });
    expect(wrong.status).toBe(409);
    expect(await wrong.json()).toEqual({ detail: { error: 'region_error', expected_region: 'us-west1', requested_region: 'us-central1' } });
  });

  test('order of checks: a missing or unknown key is 401 before a wrong or unknown region (409/422)', async () => {
    for (const path of ['/v1beta/streams', '/v1beta/chat/completions']) {
      for (const region of ['us-central1', 'mars-1']) {
        for (const authorization of [undefined, 'Bearer svc-unknown']) {
          const res = await fetch(`${emu.url}${path}`, {
            method: 'POST',
            headers: { 'content-type': 'application/json', 'X-Svc-Region': region, ...(authorization ? { authorization } : {}) },
            body: '{}',
          });
          expect([path, region, authorization, res.status]).toEqual([path, region, authorization, 401]);
        }
      }
    }
  });

  test('bad input never becomes a 500: invalid JSON 400, oversized body 413, unknown route 404', async () => {
    const badJson = await http(emu.url, 'POST', '/v1beta/chat/completions', { raw: '{"model":' });
    expect(badJson.status).toBe(400);
    expect(badJson.body).toEqual({ detail: expect.stringContaining('JSON') });
    const big = await http(emu.url, 'POST', '/v1beta/chat/completions', {
      raw: JSON.stringify({ model: 'x', pad: 'x'.repeat(2 * 1024 * 1024) }),
    });
    expect(big.status).toBe(413);
    expect((await http(emu.url, 'GET', '/v1beta/nope')).status).toBe(404);
    const badFault = await http(emu.url, 'POST', '/_emulator/faults', { body: { count: -1 } });
    expect(badFault.status).toBe(422);
  });
});

describe('emulator with a custom brand', () => {
  test('BRAND and ROOM_VENDOR drive the key prefix, region header and publish type', async () => {
    const cfg = loadConfig({ env: { BRAND: 'acme', ROOM_VENDOR: 'lk' }, overrides: { logLevel: 'silent', emulator: { port: 0 } } });
    const emu = await startEmulator(cfg, createLogger('silent'));
    try {
      const r = await fetch(`${emu.url}/v1beta/streams`, {
        method: 'POST',
        headers: { authorization: 'Bearer acme-local-dev', 'content-type': 'application/json', 'X-Acme-Region': 'us-west1' },
        body: '{}',
      });
      expect(r.status).toBe(201);
      expect(r.headers.get('x-acme-region')).toBe('us-west1');
      expect(((await r.json()) as { publish: { type: string } }).publish.type).toBe('lk');
      expect((await http(emu.url, 'POST', '/v1beta/streams', { key: 'svc-local-dev', body: {} })).status).toBe(401);
    } finally {
      await emu.close();
    }
  });
});

/**
 * Streams created from a camera source (`source: {type: "rtsp" | "hls", url}`), as the provider's
 * camera-sources page shows them, on a real emulator. The "camera" is a local TCP listener on
 * 127.0.0.1, allowed by configuration; the same address without that is refused as the provider
 * refuses private ones.
 */
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { isPublicAddress, UNREACHABLE_MESSAGE } from '../../src/emulator/camera-sources';
import { startEmulator } from '../../src/emulator/server';
import type { RunningEmulator } from '../../src/emulator/server';
import { createLogger } from '../../src/lib/logger';
import { http, KEY_BROKE } from '../helpers/stack';
import { testConfig } from '../helpers/config';

type Json = Record<string, any>;

async function listener(): Promise<{ port: number; accepted: () => number; close: () => Promise<void> }> {
  let accepted = 0;
  const server = net.createServer((socket) => {
    accepted++;
    socket.destroy();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    accepted: () => accepted,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

async function start(cameraSources: Json): Promise<RunningEmulator> {
  const cfg = testConfig({ emulator: { cameraSources } });
  return startEmulator(cfg, createLogger('silent'));
}

describe('camera sources, host allowed by configuration', () => {
  let emu: RunningEmulator;
  let camera: Awaited<ReturnType<typeof listener>>;
  beforeAll(async () => {
    camera = await listener();
    emu = await start({ allowedHosts: ['127.0.0.1'], connectTimeoutMs: 2000 });
  });
  afterAll(async () => {
    await emu.close();
    await camera.close();
  });

  it('201 with publish: null and the source type echoed; the url (with its credentials) is never returned', async () => {
    const url = `rtsp://user:secret@127.0.0.1:${camera.port}/stream`;
    const r = await http(emu.url, 'POST', '/v1beta/streams', { body: { source: { type: 'rtsp', url } } });
    expect(r.status).toBe(201);
    const b = r.body as Json;
    expect(Object.keys(b).sort()).toEqual(['expires_at_ms', 'id', 'publish', 'source', 'state', 'ttl_seconds']);
    expect(b).toMatchObject({ state: 'active', source: { type: 'rtsp' }, publish: null, ttl_seconds: 300 });
    expect(camera.accepted()).toBeGreaterThanOrEqual(1);

    const got = await http(emu.url, 'GET', `/v1beta/streams/${b.id}`);
    expect(got.body).toMatchObject({ id: b.id, state: 'active', source: { type: 'rtsp' }, last_pull: null });
    const ka = await http(emu.url, 'POST', `/v1beta/streams/${b.id}/keepalive`);
    expect(ka.status).toBe(200);
    expect((ka.body as Json).publish).toBeNull();
    for (const text of [JSON.stringify(r.body), JSON.stringify(got.body), JSON.stringify(ka.body)]) expect(text).not.toContain('secret');
  });

  it('hls takes an http(s) playlist url', async () => {
    const r = await http(emu.url, 'POST', '/v1beta/streams', {
      body: { source: { type: 'hls', url: `http://127.0.0.1:${camera.port}/live.m3u8` } },
    });
    expect(r.status).toBe(201);
    expect(r.body).toMatchObject({ source: { type: 'hls' }, publish: null });
  });

  it("a type that does not fit the scheme, or a port nobody listens on, is the provider's 422", async () => {
    const closed = await listener();
    await closed.close();
    for (const source of [
      { type: 'hls', url: `rtsp://127.0.0.1:${camera.port}/stream` },
      { type: 'rtsp', url: `http://127.0.0.1:${camera.port}/live.m3u8` },
      { type: 'rtsp', url: `rtsp://127.0.0.1:${closed.port}/stream` },
      { type: 'rtsp', url: 'not a url' },
    ]) {
      const r = await http(emu.url, 'POST', '/v1beta/streams', { body: { source } });
      expect([source.url, r.status, r.body]).toEqual([source.url, 422, { detail: UNREACHABLE_MESSAGE }]);
    }
  });

  it('a malformed source is a validation error; a client-published stream is unchanged', async () => {
    const bad = await http(emu.url, 'POST', '/v1beta/streams', { body: { source: { type: 'rtmp', url: 'rtmp://x/y' } } });
    expect(bad.status).toBe(422);
    expect(bad.body).toMatchObject({ error: 'validation_error', details: [{ loc: ['body', 'source', 'type'] }] });
    const plain = await http(emu.url, 'POST', '/v1beta/streams', { body: {} });
    expect(plain.status).toBe(201);
    expect(Object.keys(plain.body as Json).sort()).toEqual(['expires_at_ms', 'id', 'publish', 'state', 'ttl_seconds']);
  });

  it('needs credits like any stream', async () => {
    const r = await http(emu.url, 'POST', '/v1beta/streams', {
      key: KEY_BROKE,
      body: { source: { type: 'rtsp', url: `rtsp://127.0.0.1:${camera.port}/` } },
    });
    expect(r.status).toBe(402);
  });
});

describe('camera sources, no host allowed (the default)', () => {
  let emu: RunningEmulator;
  let camera: Awaited<ReturnType<typeof listener>>;
  beforeAll(async () => {
    camera = await listener();
    emu = await start({ connectTimeoutMs: 1000 });
  });
  afterAll(async () => {
    await emu.close();
    await camera.close();
  });

  it('private, loopback and link-local addresses are refused without connecting', async () => {
    for (const url of [
      `rtsp://127.0.0.1:${camera.port}/stream`,
      `rtsp://localhost:${camera.port}/stream`,
      'rtsp://10.1.2.3/stream',
      'rtsp://192.168.1.20:554/stream',
      'http://169.254.169.254/latest.m3u8',
      'rtsp://[::1]/stream',
      'rtsp://[::ffff:127.0.0.1]/stream',
    ]) {
      const type = url.startsWith('http') ? 'hls' : 'rtsp';
      const r = await http(emu.url, 'POST', '/v1beta/streams', { body: { source: { type, url } } });
      expect([url, r.status, r.body]).toEqual([url, 422, { detail: UNREACHABLE_MESSAGE }]);
    }
    expect(camera.accepted()).toBe(0);
  });

  it('address ranges', () => {
    for (const a of [
      '127.0.0.1',
      '10.0.0.1',
      '172.16.5.5',
      '192.168.0.1',
      '169.254.1.1',
      '100.64.0.1',
      '0.0.0.0',
      '::1',
      'fe80::1',
      'fd00::1',
      '::ffff:10.0.0.1',
    ]) {
      expect([a, isPublicAddress(a)]).toEqual([a, false]);
    }
    for (const a of ['8.8.8.8', '1.1.1.1', '2606:4700:4700::1111', '::ffff:8.8.8.8']) expect([a, isPublicAddress(a)]).toEqual([a, true]);
  });
});

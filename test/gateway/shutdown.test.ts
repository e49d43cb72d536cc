/**
 * Graceful shutdown: in process (drain, sockets 1001, upstream streams deleted, requests in flight
 * bounded by the grace period) and as a real process receiving SIGTERM.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { build } from 'esbuild';
import { loadConfig } from '../../src/config';
import { startEmulator } from '../../src/emulator/server';
import { createLogger } from '../../src/lib/logger';
import { frameBody, http, KEY, openResults, startStack } from '../helpers/stack';
import { deadline, delay } from './doubles';

const ROOT = path.resolve(__dirname, '..', '..');

describe('graceful shutdown in process', () => {
  test('drain refuses creates and reports not ready; close ends live streams with 1001 and deletes them upstream', async () => {
    const s = await startStack({ shutdownGraceMs: 3000 });
    let closed = false;
    try {
      const id = ((await http(s.url, 'POST', '/v0.2/streams', { body: frameBody({ interval_seconds: 0.3 }) })).body as { stream_id: string }).stream_id;
      const sock = await openResults(s.url, id);
      await sock.waitFor(1);
      await s.gateway.gateway.drain();
      expect(await sock.closed).toEqual({ code: 1001, reason: 'server_shutdown' });
      expect((await http(s.emulator.url, 'GET', `/v1beta/streams/${id}`)).body).toMatchObject({ state: 'ended', end_reason: 'deleted' });
      const refused = await http(s.url, 'POST', '/v0.2/streams', { body: frameBody() });
      expect(refused.status).toBe(503);
      expect(refused.body).toMatchObject({ error: 'shutting_down' });
      expect(await http(s.url, 'GET', '/readyz', { key: null })).toMatchObject({ status: 503, body: { draining: true } });
      // /v1beta keeps working while requests drain.
      expect((await http(s.url, 'GET', '/v1beta/models', { key: null })).status).toBe(200);
      const t0 = Date.now();
      await s.gateway.close();
      closed = true;
      expect(Date.now() - t0).toBeLessThan(1500);
    } finally {
      if (!closed) await s.gateway.close();
      await s.emulator.close();
    }
  });

  test('a request still in flight is waited for, then cut when the grace period ends', async () => {
    const s = await startStack();
    try {
      await http(s.emulator.url, 'POST', '/_emulator/faults', { body: { count: 1, latencyMs: 10_000 } });
      const pending = fetch(`${s.url}/v1beta/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'local/analyzer', messages: [{ role: 'user', content: 'hi' }] }),
      }).then(
        (r) => r.status,
        () => 'cut',
      );
      await delay(100);
      expect(s.gateway.gateway.inFlight).toBe(1);
      const t0 = Date.now();
      await s.gateway.close(800);
      const took = Date.now() - t0;
      expect(took).toBeGreaterThanOrEqual(500); // it waited for the request…
      expect(took).toBeLessThan(1000); // …but not past the grace period
      expect(await deadline(pending, 1000, 'cut request')).toBe('cut');
    } finally {
      await s.emulator.close();
    }
  });
});

describe('graceful shutdown of the process', () => {
  let dir: string;
  let bundle: string;
  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-shutdown-'));
    bundle = path.join(dir, 'main.js');
    await build({
      entryPoints: [path.join(ROOT, 'src', 'main.ts')],
      bundle: true,
      platform: 'node',
      target: 'node20',
      format: 'cjs',
      packages: 'external',
      outfile: bundle,
      logLevel: 'silent',
    });
  }, 30_000);
  afterAll(() => {
    fs.rmSync(dir, { recursive: true, force: true });
  });

  test('SIGTERM with a live legacy stream: socket closes 1001, the upstream stream is deleted, exit 0 within the grace period', async () => {
    const cfg = loadConfig({ env: {}, overrides: { emulator: { port: 0, controlApi: true, autoPublish: { enabled: true, fps: 10, width: 160, height: 120 } } } });
    const emulator = await startEmulator(cfg, createLogger('silent'));
    const graceMs = 3000;
    const child = spawn(process.execPath, [bundle, 'serve', '--config', path.join(ROOT, 'config', 'default.json')], {
      env: {
        PATH: process.env.PATH,
        NODE_PATH: path.join(ROOT, 'node_modules'),
        PORT: '0',
        HOST: '127.0.0.1',
        UPSTREAM_URL: emulator.url,
        SHUTDOWN_GRACE_MS: String(graceMs),
        LOG_LEVEL: 'info',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const lines: Record<string, unknown>[] = [];
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const exited = new Promise<{ code: number | null; at: number }>((resolve) => child.once('exit', (code) => resolve({ code, at: Date.now() })));
    try {
      const boot = await deadline(
        new Promise<Record<string, unknown>>((resolve) => {
          let buf = '';
          child.stdout.on('data', (d: Buffer) => {
            buf += d.toString();
            let nl;
            while ((nl = buf.indexOf('\n')) >= 0) {
              const line = JSON.parse(buf.slice(0, nl)) as Record<string, unknown>;
              buf = buf.slice(nl + 1);
              lines.push(line);
              if (typeof line.msg === 'string' && line.msg.startsWith('gateway listening')) resolve(line);
            }
          });
        }),
        15_000,
        `gateway boot (stderr: ${stderr})`,
      );
      // The boot log names the upstream, the port and the config layers used.
      expect(boot).toMatchObject({ upstream: emulator.url, embeddedEmulator: null, config: { files: [path.join(ROOT, 'config', 'default.json')] } });
      expect((boot.config as { env: string[] }).env.sort()).toEqual(['HOST', 'LOG_LEVEL', 'PORT', 'SHUTDOWN_GRACE_MS', 'UPSTREAM_URL']);
      expect(boot.msg).toContain(emulator.url);
      const url = boot.url as string;

      const created = await http(url, 'POST', '/v0.2/streams', { body: frameBody({ interval_seconds: 0.3 }) });
      expect(created.status).toBe(201);
      const id = (created.body as { stream_id: string }).stream_id;
      const sock = await openResults(url, id);
      await sock.waitFor(1);

      const sentAt = Date.now();
      child.kill('SIGTERM');
      expect(await deadline(sock.closed, graceMs, 'socket close')).toEqual({ code: 1001, reason: 'server_shutdown' });
      const { code, at } = await deadline(exited, graceMs + 1000, 'process exit');
      expect(code).toBe(0);
      expect(at - sentAt).toBeLessThan(graceMs);
      expect((await http(emulator.url, 'GET', `/v1beta/streams/${id}`)).body).toMatchObject({ state: 'ended', end_reason: 'deleted' });
      // The last lines: the shutdown progress and the final roll-up summary of the day.
      const msgs = lines.map((l) => String(l.msg));
      expect(msgs.some((m) => m.startsWith('SIGTERM: shutting down'))).toBe(true);
      expect(msgs.some((m) => m.startsWith('/v0.2 usage on'))).toBe(true);
      expect(msgs.some((m) => m.startsWith('stopped in'))).toBe(true);
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
      await exited;
      await emulator.close();
    }
  });
});

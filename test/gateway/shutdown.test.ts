/**
 * Graceful shutdown: in process (streams ended, sockets 1001, upstream streams deleted, requests in flight
 * bounded by the grace period) and as a real process receiving SIGTERM.
 */
import path from 'node:path';
import { startEmulator } from '../../src/emulator/server';
import { createLogger } from '../../src/lib/logger';
import { ROOT, runMain, useMainBundle } from '../helpers/main-bundle';
import { frameBody, http, KEY, startStack } from '../helpers/stack';
import { openResults } from '../helpers/results-socket';
import { TEST_PUBLISHER, testConfig } from '../helpers/config';
import { deadline, until } from '../helpers/time';

describe('graceful shutdown in process', () => {
  test('the hand-over-or-end refuses creates and reports not ready; close ends live streams with 1001 and deletes them upstream', async () => {
    const s = await startStack({ shutdownGraceMs: 3000 });
    let closed = false;
    try {
      const id = (
        (await http(s.url, 'POST', '/v0.2/streams', { body: frameBody({ interval_seconds: 0.3 }) })).body as { stream_id: string }
      ).stream_id;
      const sock = await openResults(s.url, id, KEY);
      await sock.waitFor(1);
      await s.gateway.gateway.handOverOrEnd();
      expect(await sock.closed).toEqual({ code: 1001, reason: 'server_shutdown' });
      expect((await http(s.emulator.url, 'GET', `/v1beta/streams/${id}`)).body).toMatchObject({ state: 'ended', end_reason: 'deleted' });
      const refused = await http(s.url, 'POST', '/v0.2/streams', { body: frameBody() });
      expect(refused.status).toBe(503);
      expect(refused.body).toMatchObject({ error: 'shutting_down' });
      // Not ready, and not draining: the drain is a fleet replica's step before the hand-over.
      expect(await http(s.url, 'GET', '/readyz', { key: null })).toMatchObject({ status: 503, body: { draining: false } });
      // /v1beta keeps working while requests in flight finish.
      expect((await http(s.url, 'GET', '/v1beta/models', { key: null })).status).toBe(200);
      await s.gateway.close();
      closed = true;
      await expect(fetch(`${s.url}/healthz`)).rejects.toThrow();
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
      // In flight once the gateway has it (not after a guess of how long the request takes to arrive).
      await deadline(
        until(() => s.gateway.gateway.inFlight === 1, 5),
        10_000,
        'the request in flight',
      );
      const events: string[] = [];
      const settled = pending.then((r) => events.push(`request ${r}`));
      const closing = s.gateway.close(800).then(() => events.push('closed'));
      await new Promise((r) => setImmediate(r));
      // The shutdown began and did not cut the request at once: it waits for it…
      expect(events).toEqual([]);
      expect(s.gateway.gateway.inFlight).toBe(1);
      // …and ends it when the grace period is over, long before the upstream's 10 s answer.
      await deadline(Promise.all([closing, settled]), 5000, 'close and cut');
      expect(events.sort()).toEqual(['closed', 'request cut']);
    } finally {
      await s.emulator.close();
    }
  });
});

describe('graceful shutdown of the process', () => {
  const bundle = useMainBundle();

  test('SIGTERM with a live legacy stream: socket closes 1001, the upstream stream is deleted, exit 0 within the grace period', async () => {
    const cfg = testConfig({ emulator: { autoPublish: TEST_PUBLISHER } });
    const emulator = await startEmulator(cfg, createLogger('silent'));
    // Far above what the stop takes (a few hundred ms): a loaded machine must not turn it into exit 1.
    const graceMs = 10_000;
    const main = runMain(bundle(), ['serve', '--config', path.join(ROOT, 'config', 'default.json')], {
      PORT: '0',
      HOST: '127.0.0.1',
      UPSTREAM_URL: emulator.url,
      SHUTDOWN_GRACE_MS: String(graceMs),
      SHUTDOWN_DELAY_MS: '200',
      LOG_LEVEL: 'info',
    });
    const { child, lines, exited } = main;
    try {
      const boot = await deadline(main.line('gateway listening'), 15_000, 'gateway boot');
      // The boot log names the upstream, the port and the config layers used.
      expect(boot).toMatchObject({
        upstream: emulator.url,
        embeddedEmulator: null,
        config: { files: [path.join(ROOT, 'config', 'default.json')] },
      });
      expect((boot.config as { env: string[] }).env.sort()).toEqual([
        'HOST',
        'LOG_LEVEL',
        'PORT',
        'SHUTDOWN_DELAY_MS',
        'SHUTDOWN_GRACE_MS',
        'UPSTREAM_URL',
      ]);
      expect(boot.msg).toContain(emulator.url);
      const url = boot.url as string;

      const created = await http(url, 'POST', '/v0.2/streams', { body: frameBody({ interval_seconds: 0.3 }) });
      expect(created.status).toBe(201);
      const id = (created.body as { stream_id: string }).stream_id;
      const sock = await openResults(url, id, KEY);
      await sock.waitFor(1);

      child.kill('SIGTERM');
      expect(await deadline(sock.closed, graceMs, 'socket close')).toEqual({ code: 1001, reason: 'server_shutdown' });
      // Exit 0 means the stop finished before the grace-period timer (which exits 1).
      const { code } = await deadline(exited, graceMs + 1000, 'process exit');
      expect(code).toBe(0);
      expect((await http(emulator.url, 'GET', `/v1beta/streams/${id}`)).body).toMatchObject({ state: 'ended', end_reason: 'deleted' });
      // The last lines: the shutdown progress and the final roll-up summary of the day.
      // In order: the signal, the readiness delay (unready, still serving), leaving (solo: the streams end), the end.
      const msgs = lines.map((l) => String(l.msg));
      const at = (prefix: string) => msgs.findIndex((m) => m.startsWith(prefix));
      const order = ['SIGTERM: shutting down', 'unready: serving 200 ms more', 'leaving:', '/v0.2 usage on', 'stopped in'].map(at);
      expect(msgs.some((m) => m.startsWith('drain'))).toBe(false);
      expect(order.every((i) => i >= 0)).toBe(true);
      expect([...order].sort((a, b) => a - b)).toEqual(order);
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
      await exited;
      await emulator.close();
    }
  });
});

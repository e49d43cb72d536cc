/**
 * Store selection at boot, on the real process: REDIS_URL selects Redis and needs GATEWAY_SECRET;
 * an evicting maxmemory-policy or an unreachable Redis ends the boot with one clear line.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort } from '../../helpers/util';
import { loadConfig } from '../../../src/config';
import { ROOT, runMain, useMainBundle } from '../../helpers/main-bundle';
import { startRedis, startRedisCluster } from '../../helpers/redis';
import { KEY, frameBody, http } from '../../helpers/stack';
import { deadline } from '../../helpers/time';

const SECRET = 'a-fleet-secret-of-at-least-32-characters';

describe('config', () => {
  test('REDIS_URL, GATEWAY_ID, GATEWAY_SECRET, GATEWAY_SECRET_FILE and STORE_COMMIT_BATCH_MS', () => {
    const bare = loadConfig({ env: {} }).store;
    expect(bare).toEqual({
      gatewayId: `${os.hostname()}:${process.pid}`,
      commitBatchMs: 10,
      fleet: { heartbeatMs: 1000, sweepMs: 500, deadAfterMs: 3000, fenceAfterMs: 2500, claimBackoffMs: 1500, reconcileMs: 10_000 },
    });
    // A replica must stop ticking before the fleet counts it dead.
    expect(() => loadConfig({ env: {}, overrides: { store: { fleet: { fenceAfterMs: 3000, deadAfterMs: 3000 } } } })).toThrow(
      /fenceAfterMs must be below deadAfterMs/,
    );
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-secret-'));
    try {
      const file = path.join(dir, 'secret');
      fs.writeFileSync(file, `${SECRET}\n`);
      expect(loadConfig({ env: { REDIS_URL: 'redis://r:6379/0', GATEWAY_ID: 'gw-1', GATEWAY_SECRET_FILE: file } }).store).toMatchObject({
        redisUrl: 'redis://r:6379/0',
        gatewayId: 'gw-1',
        secret: SECRET,
      });
      expect(() => loadConfig({ env: { GATEWAY_SECRET: SECRET, GATEWAY_SECRET_FILE: file } })).toThrow(
        /GATEWAY_SECRET or GATEWAY_SECRET_FILE, not both/,
      );
      expect(() => loadConfig({ env: { GATEWAY_SECRET_FILE: path.join(dir, 'absent') } })).toThrow(/GATEWAY_SECRET_FILE: cannot read/);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
    expect(() => loadConfig({ env: { GATEWAY_SECRET: 'short' } })).toThrow(/store\.secret: use at least 32 characters/);
    expect(loadConfig({ env: { STORE_COMMIT_BATCH_MS: '0' } }).store.commitBatchMs).toBe(0);
    expect(() => loadConfig({ env: { STORE_COMMIT_BATCH_MS: '500' } })).toThrow(/store\.commitBatchMs/);
    expect(() => loadConfig({ env: { REDIS_URL: 'http://r:6379' } })).toThrow(
      /store\.redisUrl: use a redis:\/\/, rediss:\/\/, redis\+cluster:\/\/host:port,host:port or redis\+sentinel:\/\/host:port,host:port\/<master name> URL/,
    );
  });
});

describe('the real process', () => {
  const bundle = useMainBundle();
  const base = { PORT: '0', HOST: '127.0.0.1', EMULATOR_PORT: '0' };

  test('REDIS_URL without GATEWAY_SECRET refuses to boot, naming the setting', async () => {
    const p = runMain(bundle(), ['serve'], { ...base, REDIS_URL: 'redis://127.0.0.1:1' });
    expect(await deadline(p.exited, 15_000, 'exit')).toEqual({ code: 2, signal: null });
    expect(p.stderr()).toMatch(/^refusing to start: REDIS_URL \(store\.redisUrl\) is set but GATEWAY_SECRET is not/);
  });

  test('an unreachable Redis: exit 1 with one clear line, no retry spew', async () => {
    const port = await freePort();
    const p = runMain(bundle(), ['serve'], { ...base, REDIS_URL: `redis://:pw@127.0.0.1:${port}`, GATEWAY_SECRET: SECRET });
    expect(await deadline(p.exited, 20_000, 'exit')).toEqual({ code: 1, signal: null });
    expect(p.stderr()).toBe(
      `cannot reach Redis at redis://:***@127.0.0.1:${port} (REDIS_URL / store.redisUrl): connect ECONNREFUSED 127.0.0.1:${port}\n`,
    );
    expect(p.lines.filter((l) => l.msg === 'redis connection error').length).toBeLessThanOrEqual(2);
    expect(p.lines.some((l) => String(l.msg).startsWith('gateway listening'))).toBe(false);
  });

  test('an evicting maxmemory-policy refuses to boot, naming the setting', async () => {
    const redis = await startRedis(['--maxmemory-policy', 'allkeys-lru']);
    try {
      const p = runMain(bundle(), ['serve'], { ...base, REDIS_URL: redis.url, GATEWAY_SECRET: SECRET });
      expect(await deadline(p.exited, 20_000, 'exit')).toEqual({ code: 2, signal: null });
      expect(p.stderr()).toMatch(/^refusing to start: Redis maxmemory-policy is allkeys-lru.*Set maxmemory-policy noeviction/);
    } finally {
      await redis.stop();
    }
  });

  test('noeviction: boots on Redis, keeps its streams there, stops cleanly on SIGTERM', async () => {
    const redis = await startRedis();
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-secret-'));
    const file = path.join(dir, 'secret');
    fs.writeFileSync(file, SECRET);
    // The shipped config (the emulator's dev keys): the bundle lives outside the repository.
    const p = runMain(bundle(), ['serve', '-c', path.join(ROOT, 'config', 'default.json')], {
      ...base,
      REDIS_URL: redis.url,
      GATEWAY_SECRET_FILE: file,
      GATEWAY_ID: 'replica-a',
    });
    try {
      const boot = await deadline(p.line('gateway listening'), 20_000, `boot (stderr: ${p.stderr()})`);
      expect(boot).toMatchObject({ store: 'redis', gatewayId: 'replica-a' });
      // A fleet sits behind a balancer: unset, the setting that tells clients apart is named.
      expect(
        p.lines.filter((l) => l.level === 40 && String(l.msg).startsWith('server.trustProxy (TRUST_PROXY) is unset in a fleet')),
      ).toHaveLength(1);
      const created = await http(String(boot.url), 'POST', '/v0.2/streams', { key: KEY, body: frameBody({ interval_seconds: 5 }) });
      expect(created.status).toBe(201);
      const id = (created.body as { stream_id: string }).stream_id;
      expect(await redis.command('EXISTS', `lg:session:{${id}}`)).toBe(':1\r\n');
      p.child.kill('SIGTERM');
      expect(await deadline(p.exited, 20_000, 'exit')).toEqual({ code: 0, signal: null });
      // The shutdown ended the stream in Redis too.
      expect(await redis.command('HGET', `lg:session:{${id}}`, 'state')).toMatch(/"ended"/);
    } finally {
      p.child.kill('SIGKILL');
      await p.exited;
      fs.rmSync(dir, { recursive: true, force: true });
      await redis.stop();
    }
  });

  test('a Redis Cluster (redis+cluster://): boots, keeps a session on the node owning its slot, stops cleanly', async () => {
    const cluster = await startRedisCluster(3);
    const p = runMain(bundle(), ['serve', '-c', path.join(ROOT, 'config', 'default.json')], {
      ...base,
      REDIS_URL: cluster.url,
      GATEWAY_SECRET: SECRET,
      GATEWAY_ID: 'replica-c',
    });
    try {
      const boot = await deadline(p.line('gateway listening'), 20_000, `boot (stderr: ${p.stderr()})`);
      expect(boot).toMatchObject({ store: 'redis', gatewayId: 'replica-c' });
      const created = await http(String(boot.url), 'POST', '/v0.2/streams', { key: KEY, body: frameBody({ interval_seconds: 5 }) });
      expect(created.status).toBe(201);
      const id = (created.body as { stream_id: string }).stream_id;
      const held = await Promise.all(cluster.nodes.map((n) => n.command('EXISTS', `lg:session:{${id}}`)));
      // On exactly one primary (the others answer MOVED).
      expect(held.filter((r) => r === ':1\r\n')).toHaveLength(1);
      p.child.kill('SIGTERM');
      expect(await deadline(p.exited, 20_000, 'exit')).toEqual({ code: 0, signal: null });
    } finally {
      p.child.kill('SIGKILL');
      await p.exited;
      await cluster.stop();
    }
  });
});

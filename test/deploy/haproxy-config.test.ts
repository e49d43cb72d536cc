/**
 * The load balancer of compose.yaml (deploy/haproxy.cfg), checked by Debian's HAProxy itself
 * (`haproxy -c`): valid, with no warning but the compose service names it cannot resolve here; and
 * a reload keeps old workers' connections (results sockets) longer than a replica's drain lasts.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { loadConfig } from '../../src/config';
import { DEPLOY } from './deploy-files';

const FILE = path.join(DEPLOY, 'haproxy.cfg');
const UNIT_MS: Record<string, number> = { us: 0.001, ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

test('haproxy -c: valid, and its only warnings are the compose hostnames it cannot resolve here', () => {
  const check = spawnSync('haproxy', ['-c', '-f', FILE], { encoding: 'utf8' });
  expect(check.status).toBe(0);
  expect(check.stdout + check.stderr).toMatch(/Configuration file is valid/);
  const warnings = check.stderr.split('\n').filter((l) => l.includes('[WARNING]'));
  expect(warnings.filter((l) => !/could not resolve address 'gateway-[abc]'/.test(l))).toEqual([]);
});

test('hard-stop-after outlasts the drain deadline plus the readiness delay', () => {
  const m = /^\s*hard-stop-after\s+(\d+)([a-z]+)\s*$/m.exec(fs.readFileSync(FILE, 'utf8'));
  expect(m).not.toBeNull();
  const hardStopMs = Number(m![1]) * UNIT_MS[m![2]!]!;
  const cfg = loadConfig({ env: { NODE_ENV: 'production' } });
  expect(hardStopMs).toBeGreaterThan(cfg.server.drainTimeoutMs + cfg.shutdownDelayMs);
});

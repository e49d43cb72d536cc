/**
 * A real HAProxy (Debian's `haproxy`) in front of a gateway, as a fleet's load balancer would be:
 * HTTP mode, `option forwardfor` (the client's address in `X-Forwarded-For`), WebSockets tunnelled.
 * Its own loopback port and temp config; missing `haproxy` fails the test (`.ci/run` installs it).
 */
import { spawn, spawnSync } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { freePort } from '../../src/bench/util';
import { sleep } from './time';

export interface Haproxy {
  /** Base URL clients call (`http://127.0.0.1:port`). */
  url: string;
  port: number;
  stop(): Promise<void>;
}

/** Started here and not yet stopped: killed when this process exits, even on a failure. */
const live = new Set<ChildProcess>();
process.once('exit', () => {
  for (const c of live) c.kill('SIGKILL');
});

const canConnect = (port: number) =>
  new Promise<boolean>((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    s.once('connect', () => (s.destroy(), resolve(true)));
    s.once('error', () => resolve(false));
  });

/** HAProxy on 127.0.0.1 forwarding every request to `backendUrl` (an http://127.0.0.1:port gateway). */
export async function startHaproxy(backendUrl: string): Promise<Haproxy> {
  const which = spawnSync('haproxy', ['-v'], { encoding: 'utf8' });
  if (which.error || which.status !== 0) {
    throw new Error('haproxy not found on PATH: install it (Debian: apt-get install haproxy; .ci/run does) — these tests need a real load balancer');
  }
  const backend = new URL(backendUrl);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-haproxy-'));
  const port = await freePort();
  const cfgFile = path.join(dir, 'haproxy.cfg');
  fs.writeFileSync(
    cfgFile,
    [
      'global',
      '  maxconn 512',
      'defaults',
      '  mode http',
      '  option forwardfor',
      '  timeout connect 5s',
      '  timeout client 30s',
      '  timeout server 30s',
      '  timeout tunnel 1h',
      'frontend fe',
      `  bind 127.0.0.1:${port}`,
      '  default_backend gateways',
      'backend gateways',
      `  server gw1 ${backend.hostname}:${backend.port}`,
      '',
    ].join('\n'),
  );
  const child = spawn('haproxy', ['-db', '-f', cfgFile], { stdio: ['ignore', 'pipe', 'pipe'] });
  live.add(child);
  let log = '';
  child.stdout?.on('data', (d: Buffer) => (log += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (log += d.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => (live.delete(child), resolve())));
  let dead = false;
  void exited.then(() => (dead = true));
  const stop = async () => {
    if (!dead) child.kill('SIGTERM');
    await exited;
    fs.rmSync(dir, { recursive: true, force: true });
  };
  let up = false;
  for (const until = Date.now() + 10_000; !dead && !up && Date.now() < until; await sleep(20)) up = await canConnect(port);
  if (!up) {
    await stop();
    throw new Error(`haproxy did not listen on 127.0.0.1:${port}: ${log}`);
  }
  return { url: `http://127.0.0.1:${port}`, port, stop };
}

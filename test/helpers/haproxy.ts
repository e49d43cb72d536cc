/**
 * A real HAProxy (Debian's `haproxy`) in front of gateway replicas, for tests and benches that need
 * a load balancer as production has one: round robin, `GET /readyz` health checks every 200 ms
 * (one failure marks a server down, one success up), WebSocket tunnels kept for an hour, and
 * `X-Forwarded-For`. A server marked down keeps its established connections (no
 * `on-marked-down shutdown-sessions`): a draining replica keeps its sockets while new work goes
 * elsewhere. Servers join at run time through the runtime API (`add server`), as a rolling deploy's
 * new processes do. Each response names the server that answered in `X-Served-By` (a WebSocket's
 * 101 too). Missing `haproxy` is an error saying how to install it (`.ci/run` does).
 */
import { spawn, spawnSync } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { sleep } from './time';
import { freePort } from './util';

/** The response header naming the server (replica) that answered. */
export const SERVED_BY = 'x-served-by';

export interface BalancerServer {
  /** Server name in HAProxy (the replica id). */
  name: string;
  /** `http://host:port` of the replica. */
  url: string;
}

export interface Balancer {
  /** `http://127.0.0.1:<port>`: what clients call. */
  url: string;
  /** Adds a health-checked server at run time; resolves once HAProxy counts it up. */
  addServer(server: BalancerServer): Promise<void>;
  /** Each server's status as HAProxy reports it (`UP`, `DOWN`, `MAINT`, …). */
  states(): Promise<Map<string, string>>;
  /** Resolves once `name`'s status starts with `status` (`UP`, `DOWN`), or fails after `timeoutMs`. */
  waitFor(name: string, status: string, timeoutMs?: number): Promise<void>;
  /** One runtime API command; the answer's text. */
  command(cmd: string): Promise<string>;
  stop(): Promise<void>;
}

export interface BalancerOptions {
  servers: BalancerServer[];
  /** Health check period (default 200 ms). */
  checkIntervalMs?: number;
}

const BACKEND = 'replicas';

/** Processes started here and not yet stopped: killed when this process exits, even on a failure. */
const live = new Set<ChildProcess>();
process.once('exit', () => {
  for (const c of live) c.kill('SIGKILL');
});

function requireHaproxy(): void {
  const probe = spawnSync('haproxy', ['-v'], { encoding: 'utf8' });
  if (probe.error || probe.status !== 0) {
    throw new Error(
      `haproxy is not installed or does not run (${probe.error?.message ?? probe.stderr.trim()}): apt-get install haproxy (.ci/run installs it)`,
    );
  }
}

const hostPort = (url: string) => {
  const u = new URL(url);
  return `${u.hostname}:${u.port}`;
};

/** A server line's check settings; a dynamic server does not inherit `default-server`, so both use this. */
const checkArgs = (interMs: number) => `check inter ${interMs}ms fall 1 rise 1`;

function configText(port: number, socket: string, servers: BalancerServer[], interMs: number): string {
  return [
    'global',
    `  stats socket ${socket} mode 600 level admin`,
    '  maxconn 4096',
    'defaults',
    '  mode http',
    '  timeout connect 2s',
    '  timeout client 1h',
    '  timeout server 1h',
    '  timeout tunnel 1h',
    // As deploy/haproxy.cfg: a connection refused by a replica that just died is tried on another.
    '  retries 3',
    '  option redispatch 1',
    '  option forwardfor',
    'frontend gateway',
    `  bind 127.0.0.1:${port}`,
    `  default_backend ${BACKEND}`,
    `backend ${BACKEND}`,
    '  balance roundrobin',
    '  option httpchk GET /readyz',
    `  http-response set-header X-Served-By %[srv_name]`,
    ...servers.map((s) => `  server ${s.name} ${hostPort(s.url)} ${checkArgs(interMs)}`),
    '',
  ].join('\n');
}

/** One runtime API command over the stats socket (non-interactive: HAProxy closes after answering). */
function runtimeCommand(socket: string, cmd: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const sock = net.connect(socket);
    let out = '';
    sock.setTimeout(5000, () => sock.destroy(new Error(`haproxy runtime API did not answer "${cmd}" within 5 s`)));
    sock.on('data', (d) => (out += d.toString()));
    sock.once('error', reject);
    sock.once('close', () => resolve(out));
    sock.once('connect', () => sock.write(`${cmd}\n`));
  });
}

/** `show stat` CSV → server name → status, for the servers (not FRONTEND/BACKEND rows) of the backend. */
function parseStates(csv: string): Map<string, string> {
  const lines = csv.split('\n').filter((l) => l.length > 0);
  const header = (lines[0] ?? '').replace(/^# /, '').split(',');
  const px = header.indexOf('pxname');
  const sv = header.indexOf('svname');
  const st = header.indexOf('status');
  const states = new Map<string, string>();
  for (const l of lines.slice(1)) {
    const f = l.split(',');
    if (f[px] !== BACKEND || f[sv] === 'BACKEND' || f[sv] === 'FRONTEND') continue;
    states.set(f[sv]!, f[st]!);
  }
  return states;
}

/** Starts HAProxy on a free loopback port in front of `servers`; resolves once every server is up. */
export async function startHaproxy(opts: BalancerOptions): Promise<Balancer> {
  requireHaproxy();
  const interMs = opts.checkIntervalMs ?? 200;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-haproxy-'));
  const socket = path.join(dir, 'admin.sock');
  const cfgFile = path.join(dir, 'haproxy.cfg');
  let child: ChildProcess | undefined;
  let port = 0;
  let log = '';
  // A port found free may be taken before HAProxy binds it: try a few.
  for (let attempt = 0; !child; attempt++) {
    port = await freePort();
    fs.writeFileSync(cfgFile, configText(port, socket, opts.servers, interMs));
    const c = spawn('haproxy', ['-f', cfgFile, '-db'], { stdio: ['ignore', 'pipe', 'pipe'] });
    live.add(c);
    log = '';
    c.stdout?.on('data', (d: Buffer) => (log += d.toString()));
    c.stderr?.on('data', (d: Buffer) => (log += d.toString()));
    let exited = false;
    c.once('exit', () => {
      exited = true;
      live.delete(c);
    });
    for (const until = Date.now() + 10_000; !exited && Date.now() < until; await sleep(20)) {
      if (fs.existsSync(socket) && (await runtimeCommand(socket, 'show info').catch(() => '')).includes('Pid:')) break;
    }
    if (!exited && fs.existsSync(socket)) child = c;
    else {
      c.kill('SIGKILL');
      if (attempt >= 2) {
        fs.rmSync(dir, { recursive: true, force: true });
        throw new Error(`haproxy did not start: ${log.slice(-2000)}`);
      }
    }
  }
  const proc = child;
  const command = (cmd: string) => runtimeCommand(socket, cmd);
  const states = async () => parseStates(await command('show stat'));
  const waitFor = async (name: string, status: string, timeoutMs = 15_000) => {
    let last: string | undefined;
    for (const until = Date.now() + timeoutMs; Date.now() < until; await sleep(50)) {
      last = (await states()).get(name);
      if (last?.startsWith(status)) return;
    }
    throw new Error(`haproxy server ${name} is ${last ?? 'unknown'}, not ${status}, after ${timeoutMs} ms`);
  };
  const balancer: Balancer = {
    url: `http://127.0.0.1:${port}`,
    command,
    states,
    waitFor,
    async addServer(server) {
      const name = `${BACKEND}/${server.name}`;
      for (const cmd of [
        `add server ${name} ${hostPort(server.url)} ${checkArgs(interMs)}`,
        `enable health ${name}`,
        `enable server ${name}`,
      ]) {
        const answer = (await command(cmd)).trim();
        // Success answers are empty or "New server registered."; anything else is the refusal.
        if (answer && !/registered/i.test(answer)) throw new Error(`haproxy refused "${cmd}": ${answer}`);
      }
      await waitFor(server.name, 'UP');
    },
    async stop() {
      if (proc.exitCode === null && proc.signalCode === null) {
        const gone = new Promise((r) => proc.once('exit', r));
        proc.kill('SIGKILL');
        await gone;
      }
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
  try {
    for (const s of opts.servers) await waitFor(s.name, 'UP');
  } catch (err) {
    await balancer.stop();
    throw err;
  }
  return balancer;
}

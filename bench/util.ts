/**
 * Bench-only helpers: a summary line, the built CLI's path, node children with line-oriented stdout,
 * health polling, CPU meters, the pattern index of an I420 frame, /metrics scrapes and Redis
 * commandstats deltas.
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { decodePattern } from '../src/emulator/frames/pattern';
import type { Pixels, RawFrame } from '../src/emulator/frames/types';
import { ROOT, freePort, quantile, rssKbOf } from '../test/helpers/util';

export function summary(samples: readonly number[], digits = 2): string {
  if (samples.length === 0) return 'no samples';
  const f = (x: number) => x.toFixed(digits);
  return `p50 ${f(quantile(samples, 0.5))}  p99 ${f(quantile(samples, 0.99))}  max ${f(Math.max(...samples))}  (n=${samples.length})`;
}

/** The built CLI (`npm run build`), which the benches run as child processes. */
export const MAIN = path.join(ROOT, 'dist', 'main.js');

export interface Child {
  proc: ChildProcess;
  /** Resolves with the first stdout line starting with `prefix` (its remainder). */
  line(prefix: string, timeoutMs?: number): Promise<string>;
  send(line: string): void;
  kill(): Promise<void>;
}

/**
 * The emulator CLI in a child process on a free loopback port, healthy when this resolves: its
 * control API on, no synthetic publisher, warnings only, unless `env` says otherwise.
 */
export async function emulatorChild(env: NodeJS.ProcessEnv = {}): Promise<{ child: Child; url: string; port: number }> {
  const port = await freePort();
  const emulator = child(MAIN, ['emulator'], {
    EMULATOR_PORT: String(port),
    EMULATOR_HOST: '127.0.0.1',
    EMULATOR_CONTROL_API: 'true',
    EMULATOR_AUTO_PUBLISH: 'false',
    LOG_LEVEL: 'warn',
    ...env,
  });
  const url = `http://127.0.0.1:${port}`;
  await waitHealthy(`${url}/healthz`);
  return { child: emulator, url, port };
}

/** Children started here and still running: SIGKILLed when the bench exits, even on a failure. */
const live = new Set<ChildProcess>();
process.once('exit', () => {
  for (const c of live) c.kill('SIGKILL');
});

/** Starts a node child process with line-oriented stdout (`nodeArgs` before the script; `ipc` adds a channel); killed when this process exits. */
export function child(
  script: string,
  args: string[],
  env: NodeJS.ProcessEnv = {},
  opts: { nodeArgs?: string[]; ipc?: boolean } = {},
): Child {
  const stdio: ('pipe' | 'inherit' | 'ipc')[] = ['pipe', 'pipe', 'inherit'];
  if (opts.ipc) stdio.push('ipc');
  const proc = spawn(process.execPath, [...(opts.nodeArgs ?? []), script, ...args], { env: { ...process.env, ...env }, stdio });
  live.add(proc);
  proc.once('exit', () => live.delete(proc));
  // A child that died took its stdin with it: a line sent later is dropped, not an EPIPE crash here.
  proc.stdin!.on('error', () => undefined);
  let buf = '';
  const waiters: { prefix: string; resolve: (s: string) => void }[] = [];
  proc.stdout!.on('data', (d: Buffer) => {
    buf += d.toString();
    let i: number;
    while ((i = buf.indexOf('\n')) >= 0) {
      const l = buf.slice(0, i);
      buf = buf.slice(i + 1);
      const w = waiters.findIndex((x) => l.startsWith(x.prefix));
      if (w >= 0) {
        const { prefix, resolve } = waiters.splice(w, 1)[0]!;
        resolve(l.slice(prefix.length).trim());
      }
    }
  });
  return {
    proc,
    line: (prefix, timeoutMs = 120_000) =>
      new Promise((resolve, reject) => {
        const t = setTimeout(() => reject(new Error(`no "${prefix}" line from ${path.basename(script)} in ${timeoutMs} ms`)), timeoutMs);
        waiters.push({ prefix, resolve: (s) => (clearTimeout(t), resolve(s)) });
      }),
    send: (l) => proc.stdin!.write(`${l}\n`),
    kill: () =>
      new Promise((resolve) => {
        if (proc.exitCode !== null) return resolve();
        proc.once('exit', () => resolve());
        proc.kill('SIGTERM');
      }),
  };
}

/** Polls until `check` is true or `ms` passed; false on timeout (a bench reports, never hangs). */
export async function waitUntil(check: () => boolean | Promise<boolean>, ms: number): Promise<boolean> {
  for (const until = Date.now() + ms; Date.now() < until; await new Promise((r) => setTimeout(r, 100))) if (await check()) return true;
  return false;
}

/** Waits until GET url answers 2xx. */
export async function waitHealthy(url: string, timeoutMs = 20_000): Promise<void> {
  const up = () =>
    fetch(url).then(
      (r) => r.ok,
      () => false,
    );
  if (!(await waitUntil(up, timeoutMs))) throw new Error(`${url} not healthy after ${timeoutMs} ms`);
}

/** CPU used by this process between two calls, as a fraction of one core. */
export function cpuMeter(): () => number {
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  return () => {
    const c = process.cpuUsage(c0);
    return (c.user + c.system) / 1000 / (performance.now() - t0);
  };
}

/** The pattern index of an I420 frame, read from a 160×120 grey copy of its luma (cheap). */
export function patternOf(raw: RawFrame): number | null {
  if (raw.format !== 'i420') return null;
  const w = 160;
  const h = 120;
  const data = Buffer.allocUnsafe(w * h * 3);
  for (let y = 0; y < h; y++) {
    const row = Math.floor((y * raw.height) / h) * raw.width;
    for (let x = 0; x < w; x++) {
      const v = raw.data[row + Math.floor((x * raw.width) / w)]!;
      const o = (y * w + x) * 3;
      data[o] = v;
      data[o + 1] = v;
      data[o + 2] = v;
    }
  }
  const px: Pixels = { width: w, height: h, data };
  return decodePattern(px);
}

/** CPU time (ms) and RSS (kB) of a process, from /proc. */
export function procSample(pid: number, ticksPerSecond: number): { cpuMs: number; rssKb: number } {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const ticks = Number(fields[11]) + Number(fields[12]); // utime + stime
  return { cpuMs: (ticks * 1000) / ticksPerSecond, rssKb: rssKbOf(pid) };
}

/** The pids of a process's children and their children (the gateway's media worker), from /proc. */
export function descendantsOf(pid: number): number[] {
  const parent = new Map<number, number[]>();
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
    } catch {
      continue; // exited while listed
    }
    const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    const list = parent.get(ppid) ?? [];
    list.push(Number(entry));
    parent.set(ppid, list);
  }
  const out: number[] = [];
  const walk = (p: number) => {
    for (const c of parent.get(p) ?? []) {
      out.push(c);
      walk(c);
    }
  };
  walk(pid);
  return out;
}

/** Per-pid samples of a process and its descendants; a process gone while read is left out. */
function treeSample(pid: number, ticks: number): Map<number, { cpuMs: number; rssKb: number }> {
  const out = new Map<number, { cpuMs: number; rssKb: number }>();
  for (const p of [pid, ...descendantsOf(pid)]) {
    try {
      out.set(p, procSample(p, ticks));
    } catch {
      // exited between listing and reading
    }
  }
  return out;
}

export interface Measured {
  /** CPU (% of one core) of the process and its descendants together. */
  cpuPct: number;
  /** RSS (kB) of the process and its descendants together, at the end. */
  rssKb: number;
  /** The descendants' share of both (the gateway's media worker). */
  children: { cpuPct: number; rssKb: number };
}

/**
 * A process's CPU (% of one core) over `seconds` and its RSS at the end, its descendants counted
 * in (a child born during the window counts from its birth) and shown apart (`ticks`: clock ticks
 * per second).
 */
export async function measure(pid: number, ticks: number, seconds: number): Promise<Measured> {
  const a = treeSample(pid, ticks);
  const t0 = performance.now();
  await new Promise((r) => setTimeout(r, seconds * 1000));
  const b = treeSample(pid, ticks);
  const ms = performance.now() - t0;
  const total = { cpuMs: 0, rssKb: 0 };
  const children = { cpuMs: 0, rssKb: 0 };
  for (const [p, end] of b) {
    const cpuMs = end.cpuMs - (a.get(p)?.cpuMs ?? 0);
    total.cpuMs += cpuMs;
    total.rssKb += end.rssKb;
    if (p !== pid) {
      children.cpuMs += cpuMs;
      children.rssKb += end.rssKb;
    }
  }
  return {
    cpuPct: (total.cpuMs / ms) * 100,
    rssKb: total.rssKb,
    children: { cpuPct: (children.cpuMs / ms) * 100, rssKb: children.rssKb },
  };
}

/** Every sample of a Prometheus text exposition, keyed by its series (name and labels as written), summed over `urls` (replicas). */
export async function scrapeMetrics(urls: readonly string[]): Promise<Map<string, number>> {
  const sum = new Map<string, number>();
  for (const url of urls) {
    const text = await fetch(`${url}/metrics`).then(
      (r) => r.text(),
      () => '',
    );
    for (const m of text.matchAll(/^([a-zA-Z_:][\w:]*(?:\{[^}]*\})?) (\S+)$/gm)) {
      const v = Number(m[2]);
      if (Number.isFinite(v)) sum.set(m[1]!, (sum.get(m[1]!) ?? 0) + v);
    }
  }
  return sum;
}

/** A series' growth between two scrapes. */
export const seriesDelta = (before: Map<string, number>, after: Map<string, number>, series: string): number =>
  (after.get(series) ?? 0) - (before.get(series) ?? 0);

/**
 * The q-quantile of an unlabelled histogram's observations between two scrapes, as the smallest
 * bucket bound holding it (an upper bound: per-observation values stay in the replicas).
 */
export function bucketQuantile(before: Map<string, number>, after: Map<string, number>, histogram: string, q: number): string {
  const prefix = `${histogram}_bucket{le="`;
  const buckets = [...after.keys()]
    .filter((k) => k.startsWith(prefix))
    .map((k) => ({
      le: k.slice(prefix.length, -2) === '+Inf' ? Infinity : Number(k.slice(prefix.length, -2)),
      n: seriesDelta(before, after, k),
    }))
    .sort((x, y) => x.le - y.le);
  const total = buckets.at(-1)?.n ?? 0;
  if (total <= 0) return 'no samples';
  const le = buckets.find((b) => b.n >= q * total)!.le;
  return `≤ ${le === Infinity ? '∞' : `${+(le * 1000).toFixed(3)} ms`}`;
}

/** Calls per Redis command between two `INFO commandstats` reads, busiest first (a script's inner calls under their own names). */
export function commandDeltas(before: Map<string, number>, after: Map<string, number>): [string, number][] {
  return [...after]
    .map(([name, calls]): [string, number] => [name, calls - (before.get(name) ?? 0)])
    .filter(([, n]) => n > 0)
    .sort((x, y) => y[1] - x[1]);
}

/**
 * The real CLI as a child process: src/main.ts bundled once per test file with esbuild (no tsc
 * build needed), dependencies resolved from node_modules.
 */
import { spawn } from 'node:child_process';
import type { ChildProcessByStdio } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { build } from 'esbuild';

export const ROOT = path.resolve(__dirname, '..', '..');

export interface MainBundle {
  file: string;
  remove(): void;
}

export async function buildMain(): Promise<MainBundle> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-main-'));
  const file = path.join(dir, 'main.js');
  await build({
    entryPoints: [path.join(ROOT, 'src', 'main.ts')],
    bundle: true,
    platform: 'node',
    target: 'node20',
    format: 'cjs',
    packages: 'external',
    outfile: file,
    logLevel: 'silent',
  });
  return { file, remove: () => fs.rmSync(dir, { recursive: true, force: true }) };
}

/** The bundle for the enclosing describe block: built before its tests, removed after them. */
export function useMainBundle(): () => MainBundle {
  let bundle: MainBundle | undefined;
  beforeAll(async () => {
    bundle = await buildMain();
  }, 30_000);
  afterAll(() => bundle?.remove());
  return () => bundle!;
}

export interface MainProcess {
  child: ChildProcessByStdio<null, Readable, Readable>;
  /** JSON log lines seen so far (stdout). */
  lines: Record<string, unknown>[];
  stderr(): string;
  stdout(): string;
  /** Resolves with the first log line whose msg starts with `prefix`. */
  line(prefix: string): Promise<Record<string, unknown>>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Runs the bundle with only PATH, NODE_PATH and `env` in its environment. */
export function runMain(bundle: MainBundle, args: string[], env: Record<string, string>): MainProcess {
  const child = spawn(process.execPath, [bundle.file, ...args], {
    env: { PATH: process.env.PATH, NODE_PATH: path.join(ROOT, 'node_modules'), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: Record<string, unknown>[] = [];
  const watchers: { prefix: string; resolve: (l: Record<string, unknown>) => void }[] = [];
  let out = '';
  let err = '';
  let buf = '';
  child.stdout.on('data', (d: Buffer) => {
    out += d.toString();
    buf += d.toString();
    let nl;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const text = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      let line: Record<string, unknown>;
      try {
        line = JSON.parse(text) as Record<string, unknown>;
      } catch {
        continue;
      }
      lines.push(line);
      for (const w of watchers.filter((w) => String(line.msg).startsWith(w.prefix))) w.resolve(line);
    }
  });
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  return {
    child,
    lines,
    stderr: () => err,
    stdout: () => out,
    line: (prefix) =>
      new Promise((resolve) => {
        const seen = lines.find((l) => String(l.msg).startsWith(prefix));
        if (seen) resolve(seen);
        else watchers.push({ prefix, resolve });
      }),
    exited,
  };
}

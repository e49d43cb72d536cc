/**
 * A node script as a child process with its JSON log lines parsed (the real CLI in tests and in
 * the fleet harness). Every process started here is SIGKILLed when this process exits, so a failed
 * test or bench leaves none behind.
 */
import { spawn } from 'node:child_process';
import type { ChildProcessByStdio } from 'node:child_process';
import type { Readable } from 'node:stream';

export interface NodeProcess {
  child: ChildProcessByStdio<null, Readable, Readable>;
  /** JSON log lines seen so far (stdout). */
  lines: Record<string, unknown>[];
  stderr(): string;
  stdout(): string;
  /** Resolves with the first log line whose msg starts with `prefix`. */
  line(prefix: string): Promise<Record<string, unknown>>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

const live = new Set<ChildProcessByStdio<null, Readable, Readable>>();
process.once('exit', () => {
  for (const c of live) c.kill('SIGKILL');
});

/**
 * Runs `script` with exactly `env` as its environment. `keepText` false drops the raw stdout text
 * (a long bench run logs a lot; the parsed lines are kept either way unless `keepLines` is false).
 */
export function runNode(
  script: string,
  args: string[],
  env: Record<string, string | undefined>,
  opts: { keepText?: boolean; keepLines?: boolean; nodeArgs?: string[]; onLine?: (line: Record<string, unknown>) => void } = {},
): NodeProcess {
  const child = spawn(process.execPath, [...(opts.nodeArgs ?? []), script, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  live.add(child);
  const lines: Record<string, unknown>[] = [];
  const watchers: { prefix: string; resolve: (l: Record<string, unknown>) => void }[] = [];
  let out = '';
  let err = '';
  let buf = '';
  child.stdout.on('data', (d: Buffer) => {
    if (opts.keepText !== false) out += d.toString();
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
      if (opts.keepLines !== false) lines.push(line);
      opts.onLine?.(line);
      for (const w of watchers.filter((w) => String(line.msg).startsWith(w.prefix))) {
        watchers.splice(watchers.indexOf(w), 1);
        w.resolve(line);
      }
    }
  });
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => {
      live.delete(child);
      resolve({ code, signal });
    }),
  );
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

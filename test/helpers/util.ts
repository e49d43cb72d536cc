/** Small helpers the process harnesses share with the benches: the repository root, a free port, polling, a quantile. */
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';

/** The repository root: the nearest folder above this file holding package.json (the same from test/helpers and from a compiled bench). */
export const ROOT = (() => {
  for (let dir = __dirname; ; dir = path.dirname(dir)) {
    if (fs.existsSync(path.join(dir, 'package.json'))) return dir;
    if (path.dirname(dir) === dir) throw new Error(`no package.json above ${__dirname}`);
  }
})();

/** Resident memory of a process in kB, from /proc (0 once it is gone). */
export function rssKbOf(pid: number | undefined): number {
  try {
    return Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0);
  } catch {
    return 0;
  }
}

/** p-quantile of unsorted samples (nearest rank). */
export function quantile(samples: readonly number[], q: number): number {
  if (samples.length === 0) return NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

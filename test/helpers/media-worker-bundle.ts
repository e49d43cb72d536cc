/**
 * The media worker (src/gateway/ingest/media-worker.ts) as a script a replica running from the
 * sources (jest) can fork: bundled with esbuild, once per state of src/ (its newest mtime names
 * the bundle, so parallel suites share it), under node_modules/.cache so it finds its packages.
 */
import fs from 'node:fs';
import path from 'node:path';
import { build } from 'esbuild';
import type { BuildOptions } from 'esbuild';
import { ROOT } from './util';

/**
 * How the tests bundle a Node entry (the CLI, the media worker): packages stay external, and
 * import() of a package becomes require(), as tsc emits it for dist/: a bundle outside the tree
 * finds its packages through NODE_PATH, which only require() reads (the on-demand
 * `@livekit/rtc-node` and `@roamhq/wrtc`).
 */
export const NODE_BUNDLE: BuildOptions = {
  bundle: true,
  platform: 'node',
  target: 'node20',
  format: 'cjs',
  packages: 'external',
  supported: { 'dynamic-import': false },
  logLevel: 'silent',
};

function newestMtime(dir: string): number {
  let newest = 0;
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestMtime(p) : fs.statSync(p).mtimeMs);
  }
  return newest;
}

let cached: Promise<string> | undefined;

/** The bundled worker's path (built when src/ changed since the last build). */
export function mediaWorkerScript(): Promise<string> {
  cached ??= (async () => {
    const dir = path.join(ROOT, 'node_modules', '.cache', 'gw-media-worker');
    const file = path.join(dir, `media-worker-${Math.floor(newestMtime(path.join(ROOT, 'src')))}.js`);
    if (fs.existsSync(file)) return file;
    fs.mkdirSync(dir, { recursive: true });
    const tmp = `${file}.${process.pid}.tmp`;
    await build({
      ...NODE_BUNDLE,
      entryPoints: [path.join(ROOT, 'src', 'gateway', 'ingest', 'media-worker.ts')],
      outfile: tmp,
    });
    fs.renameSync(tmp, file);
    return file;
  })();
  return cached;
}

/**
 * The real CLI as a child process: src/main.ts bundled once per test file with esbuild (no tsc
 * build needed), dependencies resolved from node_modules.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { build } from 'esbuild';
import { NODE_BUNDLE } from './media-worker-bundle';
import { runNode } from './node-process';
import type { NodeProcess } from './node-process';
import { ROOT } from './util';

export { ROOT };

export interface MainBundle {
  file: string;
  remove(): void;
}

export async function buildMain(): Promise<MainBundle> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-main-'));
  const file = path.join(dir, 'main.js');
  await build({
    ...NODE_BUNDLE,
    // The media worker beside main.js, where the replica forks it from (as in dist/).
    entryPoints: {
      main: path.join(ROOT, 'src', 'main.ts'),
      'media-worker': path.join(ROOT, 'src', 'gateway', 'ingest', 'media-worker.ts'),
    },
    outdir: dir,
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

export type MainProcess = NodeProcess;

/** Runs the bundle with only PATH, NODE_PATH and `env` in its environment. */
export function runMain(bundle: MainBundle, args: string[], env: Record<string, string>): MainProcess {
  return runNode(bundle.file, args, { PATH: process.env.PATH, NODE_PATH: path.join(ROOT, 'node_modules'), ...env });
}

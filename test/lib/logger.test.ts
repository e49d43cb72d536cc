/**
 * The process's log destination (standard output, written in chunks): a lone line still comes out
 * while the process runs on, and lines logged right before `process.exit` are not lost.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { build } from 'esbuild';
import { runNode } from '../helpers/node-process';
import { deadline } from '../helpers/time';
import { ROOT } from '../helpers/main-bundle';

/** Logs one line through the default destination, then exits (`exit`) or idles until killed. */
const SCRIPT = `
import { createLogger } from ${JSON.stringify(path.join(ROOT, 'src', 'lib', 'logger.ts'))};
createLogger('info', 'probe').info({ n: 1 }, 'one line');
if (process.argv[2] === 'exit') process.exit(3);
else setInterval(() => undefined, 60_000);
`;

describe('createLogger on standard output', () => {
  let dir: string;
  let file: string;
  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-logger-'));
    file = path.join(dir, 'probe.js');
    await build({
      stdin: { contents: SCRIPT, loader: 'ts', resolveDir: ROOT },
      bundle: true,
      platform: 'node',
      format: 'cjs',
      packages: 'external',
      outfile: file,
      logLevel: 'silent',
    });
  }, 30_000);
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  const run = (arg: string) => runNode(file, [arg], { PATH: process.env.PATH, NODE_PATH: path.join(ROOT, 'node_modules') });

  test('a line logged right before process.exit is written', async () => {
    const p = run('exit');
    expect(await deadline(p.exited, 10_000, 'probe exit')).toEqual({ code: 3, signal: null });
    expect(p.lines).toEqual([
      expect.objectContaining({ msg: 'one line', n: 1, name: 'probe', time: expect.stringMatching(/^\d{4}-\d\d-\d\dT[\d:.]+Z$/) }),
    ]);
  });

  test('a lone line comes out while the process runs on', async () => {
    const p = run('idle');
    try {
      expect(await deadline(p.line('one line'), 10_000, 'the lone line')).toMatchObject({ n: 1 });
    } finally {
      p.child.kill('SIGKILL');
      await p.exited;
    }
  });
});

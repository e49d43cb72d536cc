/**
 * Starting from dist/: `npm start`'s build step (scripts/build.js) leaves a current dist/ alone and
 * compiles only what changed, removing the outputs of deleted sources; and the built CLI's manners
 * (--version, a port it cannot have). Everything runs in a copy of the project (sources, config,
 * docs, scripts; node_modules linked) with its own dist/, built once here, never in the working
 * tree's dist/.
 */
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { PortUnavailableError } from '../src/lib/listen';
import { runNode } from './helpers/node-process';
import { deadline, until } from './helpers/time';
import { ROOT, freePort } from './helpers/util';

const COPIED = ['src', 'config', 'docs', 'scripts', 'package.json', 'package-lock.json', 'tsconfig.json', 'tsconfig.build.json'];
/** A source nothing imports, removed by a test below. */
const PROBE = path.join('src', 'build-probe.ts');

let dir = '';
/** How long the first, full build took: about what a start that compiles costs. */
let fullBuildMs = 0;

const at = (...parts: string[]) => path.join(dir, ...parts);
const mtimeOf = (file: string) => fs.statSync(at(file)).mtimeMs;

function buildStep(): { code: number | null; stderr: string; ms: number } {
  const started = Date.now();
  const r = spawnSync(process.execPath, ['scripts/build.js'], { cwd: dir, encoding: 'utf8', timeout: 170_000 });
  return { code: r.status, stderr: r.stderr, ms: Date.now() - started };
}

/** Every file under dist/ with its mtime. */
function distFiles(): Record<string, number> {
  return Object.fromEntries(
    fs
      .readdirSync(at('dist'), { recursive: true, withFileTypes: true })
      .filter((e) => e.isFile())
      .map((e) => [path.relative(at('dist'), path.join(e.parentPath, e.name)), fs.statSync(path.join(e.parentPath, e.name)).mtimeMs]),
  );
}

beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-start-'));
  for (const name of COPIED) fs.cpSync(path.join(ROOT, name), at(name), { recursive: true });
  fs.symlinkSync(path.join(ROOT, 'node_modules'), at('node_modules'));
  fs.writeFileSync(at(PROBE), 'export const probe = 1;\n');
  const first = buildStep();
  fullBuildMs = first.ms;
  expect(first).toMatchObject({
    code: 0,
    stderr: expect.stringMatching(/^building dist\/ \(no finished build to start from: \d+ sources\)…\n/),
  });
  expect(first.stderr).toMatch(/^built dist\/ in [\d.]+ s$/m);
}, 180_000);

afterAll(() => {
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

describe('the build step', () => {
  test('on a current dist/ it runs no compiler and writes nothing', () => {
    const before = distFiles();
    const r = buildStep();
    expect(r).toMatchObject({ code: 0, stderr: expect.stringMatching(/^dist\/ is up to date \(\d+ sources\)\n$/) });
    expect(distFiles()).toEqual(before);
  });

  test('npm start on a current dist/ answers /healthz without building', async () => {
    const before = distFiles();
    const port = await freePort();
    const started = Date.now();
    const env = { PATH: process.env.PATH, HOME: process.env.HOME, PORT: String(port), HOST: '127.0.0.1', EMULATOR_PORT: '0' };
    // Its own process group: npm, its shell and node go together.
    const npm = spawn('npm', ['start'], { cwd: dir, env, detached: true, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    npm.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    try {
      const healthy = async () => {
        if (npm.exitCode !== null) throw new Error(`npm start exited ${npm.exitCode}: ${stderr}`);
        return (await fetch(`http://127.0.0.1:${port}/healthz`).catch(() => undefined))?.ok === true;
      };
      await deadline(until(healthy), 60_000, '/healthz');
      // Told apart from a start that compiled by what it did, not how long it took: the build step
      // said dist/ is current and nothing under dist/ was written.
      expect(stderr).toMatch(/dist\/ is up to date/);
      expect(distFiles()).toEqual(before);
      console.log(`npm start on a current dist/: /healthz after ${Date.now() - started} ms (a full build: ${fullBuildMs} ms)`);
    } finally {
      process.kill(-npm.pid!, 'SIGKILL');
    }
  }, 70_000);

  test('a changed source is compiled again; the outputs of a removed one are deleted', () => {
    fs.appendFileSync(at('src', 'main.ts'), '// changed by the start test\n');
    fs.rmSync(at(PROBE));
    const untouched = mtimeOf('dist/config.js');
    const r = buildStep();
    expect(r).toMatchObject({ code: 0, stderr: expect.stringMatching(/^building dist\/ \(1 changed source, 1 removed source\)…\n/) });
    expect(fs.readFileSync(at('dist', 'main.js'), 'utf8')).toContain('// changed by the start test');
    expect(fs.existsSync(at('dist', 'build-probe.js'))).toBe(false);
    expect(fs.existsSync(at('dist', 'build-probe.js.map'))).toBe(false);
    expect(mtimeOf('dist/config.js')).toBe(untouched);
    expect(buildStep().stderr).toMatch(/^dist\/ is up to date/);
  }, 120_000);
});

describe('the built CLI', () => {
  const run = (args: string[], env: Record<string, string> = {}) =>
    runNode(at('dist', 'main.js'), args, { PATH: process.env.PATH, ...env });

  test.each([[['--version']], [['-v']], [['emulator', '--version']]])('%j prints the package version and exits 0', async (args) => {
    const { version } = JSON.parse(fs.readFileSync(at('package.json'), 'utf8')) as { version: string };
    const p = run(args);
    expect(await deadline(p.exited, 15_000, 'exit')).toEqual({ code: 0, signal: null });
    expect(p.stdout()).toBe(`legacy-gateway ${version}\n`);
  });

  test.each([
    ['PORT', /^port (\d+) is in use \(gateway\): set PORT \(or "port" in the config file\) to a free port$/],
    ['EMULATOR_PORT', /^port (\d+) is in use \(emulator\): set EMULATOR_PORT \(or "emulator.port" in the config file\)/],
    ['METRICS_PORT', /^port (\d+) is in use \(metrics\): set METRICS_PORT \(or "telemetry.metricsPort" in the config file\)/],
  ])('%s in use: serve exits 1 with one line naming the port and the setting', async (setting, message) => {
    const holder = net.createServer();
    await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
    const busy = (holder.address() as net.AddressInfo).port;
    try {
      const p = run(['serve'], { HOST: '127.0.0.1', PORT: '0', EMULATOR_PORT: '0', [setting]: String(busy) });
      expect(await deadline(p.exited, 20_000, `exit (stderr: ${p.stderr()})`)).toEqual({ code: 1, signal: null });
      const lines = p.stderr().trimEnd().split('\n');
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(message);
      expect(message.exec(lines[0]!)?.[1]).toBe(String(busy));
      expect(p.stderr()).not.toMatch(/^\s+at /m);
    } finally {
      holder.close();
    }
  });
});

test('a privileged port without the privilege names the setting and the fix', () => {
  const err = new PortUnavailableError(80, 'EACCES', { server: 'gateway', setting: 'PORT (or "port" in the config file)' });
  expect(err.message).toBe(
    'no permission to listen on port 80 (gateway): a port below 1024 needs privileges; set PORT (or "port" in the config file) to a port above 1023',
  );
});

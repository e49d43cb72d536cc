/**
 * The Docker image, checked without a Docker engine: built on the Node LTS that `engines` and the
 * README name, its runtime stage holding production dependencies and compiled code only, no
 * source file importing a dev dependency or anything outside src/ (the benchmarks in bench/ and
 * the test harnesses never reach the build).
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { ROOT } from './deploy-files';

const dockerfile = fs.readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8');
const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as {
  engines: { node: string };
  devDependencies: Record<string, string>;
};
const devDeps = Object.keys(pkg.devDependencies);

/** Stages by name: the instructions after each `FROM … AS name`. */
function stages(): Map<string, string> {
  const out = new Map<string, string>();
  for (const m of dockerfile.matchAll(/^FROM (\S+) AS (\w+)\n([\s\S]*?)(?=^FROM |$(?![\s\S]))/gm)) out.set(m[2]!, `FROM ${m[1]}\n${m[3]}`);
  return out;
}

test('every stage builds on Node 24, the LTS that engines and the README name', () => {
  const image = /^ARG NODE_IMAGE=(\S+)/m.exec(dockerfile)?.[1];
  expect(image).toMatch(/^node:24-[a-z]+-slim$/);
  const froms = [...dockerfile.matchAll(/^FROM (\S+)/gm)].map((m) => m[1]);
  expect(froms.length).toBeGreaterThanOrEqual(2);
  for (const f of froms) expect(f).toBe('${NODE_IMAGE}');
  expect(pkg.engines.node).toMatch(/(^|\|\|\s*)>=24(\s|$)/);
  const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
  expect(readme).toMatch(/Supported Node versions \(`engines`\): \*\*24\*\*[^.]*\*\*22\.22\+\*\*/);
  expect(pkg.engines.node).toContain('22.22');
});

test('the runtime stage holds production dependencies, dist, config and docs, and runs as node in production', () => {
  const s = stages();
  expect([...s.keys()]).toEqual(['build', 'deps', 'runtime']);
  expect(s.get('deps')).toMatch(/npm (install|ci) --omit=dev/);
  const runtime = s.get('runtime')!;
  expect(runtime).toMatch(/^ENV NODE_ENV=production$/m);
  expect(runtime).toMatch(/^USER node$/m);
  expect(runtime).not.toMatch(/^RUN npm/m);
  const copies = [...runtime.matchAll(/^COPY (.+)$/gm)].map((m) => m[1]);
  expect(copies).toEqual([
    'package.json ./',
    '--from=deps /app/node_modules ./node_modules',
    '--from=build /app/dist ./dist',
    'config ./config',
    'docs ./docs',
  ]);
});

test('the image and npm start run node with the same V8 heap flags, and this node takes them', () => {
  const entry = JSON.parse(/^ENTRYPOINT (\[.*\])$/m.exec(dockerfile)?.[1] ?? '[]') as string[];
  expect(entry).toEqual(['node', '--heap-growing-percent=30', '--max-semi-space-size=16', 'dist/main.js']);
  const start = (JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts.start;
  expect(start).toBe(`${entry.join(' ')} serve`);
  // An unknown V8 flag would stop node before the gateway starts.
  const r = spawnSync(process.execPath, [...entry.slice(1, -1), '-e', 'process.stdout.write("ran")'], { encoding: 'utf8' });
  expect(r.stdout).toBe('ran');
});

test('no dev dependency is in the production dependency tree', () => {
  const r = spawnSync('npm', ['ls', '--omit=dev', '--all', '--parseable'], { cwd: ROOT, encoding: 'utf8', timeout: 60_000 });
  const prod = new Set(
    r.stdout
      .split('\n')
      .filter(Boolean)
      .map((p) => p.split(`node_modules${path.sep}`).pop()!),
  );
  expect(prod.size).toBeGreaterThan(20);
  expect(devDeps.filter((d) => prod.has(d))).toEqual([]);
});

function sourceFiles(dir: string): string[] {
  return fs
    .readdirSync(dir, { withFileTypes: true })
    .flatMap((e) => (e.isDirectory() ? sourceFiles(path.join(dir, e.name)) : e.name.endsWith('.ts') ? [path.join(dir, e.name)] : []));
}

test('the compiled code imports no dev dependency and nothing outside src/ (bench/ and test/ never ship)', () => {
  const packageOf = (spec: string) => (spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0]!);
  const srcDir = path.join(ROOT, 'src');
  const offenders: string[] = [];
  for (const file of sourceFiles(srcDir)) {
    const rel = path.relative(ROOT, file);
    const text = fs.readFileSync(file, 'utf8');
    for (const m of text.matchAll(/^\s*(?:import|export)\s[^'"]*?from\s+'([^']+)'|^\s*import\s+'([^']+)'|\bimport\('([^']+)'\)/gm)) {
      const spec = m[1] ?? m[2] ?? m[3]!;
      if (spec.startsWith('.')) {
        const target = path.resolve(path.dirname(file), spec);
        if (path.relative(srcDir, target).startsWith('..')) offenders.push(`${rel} imports ${spec}, outside src/`);
      } else if (devDeps.includes(packageOf(spec)) && !/^\s*(?:import|export)\s+type\s/.test(m[0])) {
        offenders.push(`${rel} imports ${spec}`);
      }
    }
  }
  expect(offenders).toEqual([]);
  expect(sourceFiles(srcDir).filter((f) => /bench/.test(path.relative(srcDir, f)))).toEqual([]);
});

test('the build compiles src/ only, and the bench build stays out of the image', () => {
  const build = JSON.parse(fs.readFileSync(path.join(ROOT, 'tsconfig.build.json'), 'utf8')) as { include: string[] };
  expect(build.include).toEqual(['src']);
  expect(stages().get('build')).toMatch(/^COPY src \.\/src$/m);
  const ignored = fs.readFileSync(path.join(ROOT, '.dockerignore'), 'utf8').split('\n');
  for (const dir of ['bench', 'dist-bench', 'test']) expect(ignored).toContain(dir);
});

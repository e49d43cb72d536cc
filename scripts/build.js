#!/usr/bin/env node
// @ts-check
/**
 * Builds dist/ from src/ when it is out of date, and only then: `npm start`, `npm run demo`,
 * `npm run emulator` and `npm run bench` start at once on a current dist/.
 *
 * dist/ is current when a build succeeded and, since it started, no source under src/ (nor
 * tsconfig*.json, package.json, package-lock.json) changed, none was added and none removed.
 * Otherwise tsc compiles incrementally (its state in dist/.tsbuildinfo) and the outputs of
 * sources that no longer exist are removed, so dist/ holds what a clean build would. Files are
 * rewritten in place, never dist/ as a whole: a process running from dist/ keeps its loaded code.
 *
 *   node scripts/build.js            build if needed
 *   node scripts/build.js --clean    delete dist/ and build everything
 *
 * Progress goes to stderr; the exit status is tsc's (0 when nothing had to be built).
 */
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const { spawnSync } = require('node:child_process');

const ROOT = path.resolve(__dirname, '..');
const SRC = path.join(ROOT, 'src');
const DIST = path.join(ROOT, 'dist');
const TSCONFIG = 'tsconfig.build.json';
/** Renamed to STAMP when a build succeeds: its mtime (the file system's clock) is when that build started. */
const STARTED = path.join(DIST, '.build-started');
const STAMP = path.join(DIST, '.build-stamp');
/** tsc's incremental state, inside dist/ so that it goes whenever dist/ goes. */
const BUILD_INFO = path.join(DIST, '.tsbuildinfo');
/** Inputs besides the sources whose change may change the output. */
const INPUTS = ['tsconfig.json', TSCONFIG, 'package.json', 'package-lock.json'];
/** What tsc writes for a source `x.ts`: the suffixes by which an output names its source. */
const OUTPUT_SUFFIXES = ['.js', '.js.map', '.d.ts', '.d.ts.map'];

const log = (/** @type {string} */ line) => process.stderr.write(`${line}\n`);
const plural = (/** @type {number} */ n, /** @type {string} */ word) => `${n} ${word}${n === 1 ? '' : 's'}`;

/** Every file under `dir` (none if it does not exist), as paths relative to it. */
function filesUnder(/** @type {string} */ dir) {
  if (!fs.existsSync(dir)) return [];
  return fs
    .readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => path.relative(dir, path.join(e.parentPath, e.name)));
}

const mtime = (/** @type {string} */ file) => fs.statSync(file, { throwIfNoEntry: false })?.mtimeMs;

/** The source path without `.ts` that an output of tsc belongs to; undefined for any other file. */
function stemOf(/** @type {string} */ output) {
  const suffix = OUTPUT_SUFFIXES.find((s) => output.endsWith(s));
  return suffix === undefined ? undefined : output.slice(0, -suffix.length);
}

/** What a build would have to do, from the file system alone. */
function plan() {
  const sources = filesUnder(SRC).filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts'));
  const stems = new Set(sources.map((f) => f.slice(0, -'.ts'.length)));
  const builtAt = mtime(STAMP);
  // `>=`: on a file system with coarse timestamps an edit in the build's first tick still counts.
  const newer = (/** @type {string} */ file) => builtAt === undefined || (mtime(file) ?? -Infinity) >= builtAt;
  const changed = sources.filter((f) => newer(path.join(SRC, f)));
  const missing = sources.filter((f) => !fs.existsSync(path.join(DIST, `${f.slice(0, -'.ts'.length)}.js`)));
  const stale = filesUnder(DIST).filter((f) => {
    const stem = stemOf(f);
    return stem !== undefined && !stems.has(stem);
  });
  const inputs = INPUTS.filter((f) => fs.existsSync(path.join(ROOT, f)) && newer(path.join(ROOT, f)));
  return { sources, builtAt, changed, missing, stale, inputs };
}

/** Removes the outputs of deleted sources, then the folders that left empty. */
function removeStale(/** @type {string[]} */ stale) {
  for (const f of stale) fs.rmSync(path.join(DIST, f), { force: true });
  const dirs = [...new Set(stale.map((f) => path.dirname(f)))].filter((d) => d !== '.');
  for (const dir of dirs.sort((a, b) => b.length - a.length)) {
    const abs = path.join(DIST, dir);
    if (fs.existsSync(abs) && fs.readdirSync(abs).length === 0) fs.rmdirSync(abs);
  }
}

function reason(/** @type {ReturnType<typeof plan>} */ p) {
  if (p.builtAt === undefined) return `no finished build to start from: ${plural(p.sources.length, 'source')}`;
  const parts = [];
  const removed = new Set(p.stale.map(stemOf));
  if (p.changed.length) parts.push(plural(p.changed.length, 'changed source'));
  if (p.missing.length) parts.push(plural(p.missing.length, 'missing output'));
  if (removed.size) parts.push(plural(removed.size, 'removed source'));
  if (p.inputs.length) parts.push(`${p.inputs.join(', ')} changed`);
  return parts.join(', ');
}

function build(/** @type {{ clean: boolean }} */ opts) {
  if (opts.clean) fs.rmSync(DIST, { recursive: true, force: true });
  const p = plan();
  if (p.builtAt !== undefined && !p.changed.length && !p.missing.length && !p.stale.length && !p.inputs.length) {
    log(`dist/ is up to date (${plural(p.sources.length, 'source')})`);
    return 0;
  }
  log(`building dist/ (${opts.clean ? `clean build: ${plural(p.sources.length, 'source')}` : reason(p)})…`);
  removeStale(p.stale);
  // tsc --incremental re-emits only what changed since its last run: an output deleted behind its
  // back would stay missing. Without its state it emits everything (overwriting, never deleting).
  if (p.missing.length) fs.rmSync(BUILD_INFO, { force: true });
  // Until this build succeeds, dist/ is not current (an interrupted or failed build is redone).
  fs.rmSync(STAMP, { force: true });
  fs.mkdirSync(DIST, { recursive: true });
  // A fresh file, so that its mtime is now (a leftover of an interrupted build is replaced).
  fs.rmSync(STARTED, { force: true });
  fs.writeFileSync(STARTED, '');
  const started = Date.now();
  const tsc = require.resolve('typescript/bin/tsc', { paths: [ROOT] });
  const r = spawnSync(process.execPath, [tsc, '-p', TSCONFIG, '--incremental', '--tsBuildInfoFile', BUILD_INFO], {
    cwd: ROOT,
    stdio: 'inherit',
  });
  const seconds = ((Date.now() - started) / 1000).toFixed(1);
  if (r.status !== 0) {
    fs.rmSync(STARTED, { force: true });
    log(`build failed after ${seconds} s (tsc ${r.error ? r.error.message : r.signal ? `killed by ${r.signal}` : `exit ${r.status}`})`);
    return r.status || 1;
  }
  fs.renameSync(STARTED, STAMP);
  log(`built dist/ in ${seconds} s`);
  return 0;
}

const args = process.argv.slice(2);
const unknown = args.filter((a) => a !== '--clean');
if (unknown.length) {
  log(`scripts/build.js: unknown argument ${unknown[0]} (usage: node scripts/build.js [--clean])`);
  process.exit(2);
}
process.exitCode = build({ clean: args.includes('--clean') });

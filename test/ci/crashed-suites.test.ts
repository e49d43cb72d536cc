/**
 * .ci/crashed-suites.js, on jest --json results as jest writes them: a suite whose worker crashed
 * (and failed no assertion) is named for a rerun; any failed assertion, or a suite that failed to
 * run for another reason, fails CI at once.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ROOT } from '../helpers/util';

const SCRIPT = path.join(ROOT, '.ci', 'crashed-suites.js');

function run(testResults: unknown[] | null): { status: number | null; stdout: string; stderr: string } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ci-results-'));
  const file = path.join(dir, 'results.json');
  if (testResults) fs.writeFileSync(file, JSON.stringify({ testResults }));
  const r = spawnSync(process.execPath, [SCRIPT, file], { encoding: 'utf8' });
  fs.rmSync(dir, { recursive: true, force: true });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

const crashed = {
  name: '/repo/test/a.test.ts',
  status: 'failed',
  message:
    '  ● Test suite failed to run\n\n    A jest worker process (pid=28347) was terminated by another process: signal=SIGSEGV, exitCode=null.',
  assertionResults: [],
};
const asserted = {
  name: '/repo/test/b.test.ts',
  status: 'failed',
  message: '  ● fail\n\n    expect(received).toBe(expected)',
  assertionResults: [{ status: 'failed' }, { status: 'passed' }],
};
const broken = {
  name: '/repo/test/c.test.ts',
  status: 'failed',
  message: "  ● Test suite failed to run\n\n    Cannot find module './gone' from 'test/c.test.ts'",
  assertionResults: [],
};
const passed = { name: '/repo/test/d.test.ts', status: 'passed', message: '', assertionResults: [{ status: 'passed' }] };

test('a crashed worker: its suite is named (stdout) with why (stderr), exit 0', () => {
  const r = run([crashed, passed]);
  expect(r.status).toBe(0);
  expect(r.stdout).toBe('/repo/test/a.test.ts\n');
  expect(r.stderr).toContain('/repo/test/a.test.ts: its jest worker crashed (signal=SIGSEGV)');
});

test('a failed assertion fails CI at once, even beside a crash', () => {
  const r = run([crashed, asserted]);
  expect(r.status).toBe(1);
  expect(r.stdout).toBe('');
  expect(r.stderr).toContain('/repo/test/b.test.ts: 1 failed assertion(s)');
});

test('a suite that failed to run for another reason than a crash fails CI; so do missing results', () => {
  expect(run([broken]).status).toBe(1);
  const none = run(null);
  expect(none.status).toBe(1);
  expect(none.stderr).toContain('jest wrote no results');
});

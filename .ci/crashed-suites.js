#!/usr/bin/env node
/**
 * Reads jest's --json results (the file named as the argument) after a failed run and decides
 * what CI may run again: only suites whose jest worker crashed (a signal, an exec error: native
 * media code can SIGSEGV at teardown) and that failed no assertion. Prints each such suite and
 * why on stderr, and their paths on stdout (one per line) for the rerun. Exits 1, naming them,
 * when any suite failed an assertion (or failed otherwise than by a crash): that fails CI at once.
 */
'use strict';
const fs = require('node:fs');

if (!fs.existsSync(process.argv[2] ?? '')) {
  process.stderr.write('jest wrote no results (its own process crashed?): CI fails\n');
  process.exit(1);
}
const results = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const CRASH =
  /signal[ =:]*SIG[A-Z]+|SIGSEGV|SIGABRT|SIGBUS|SIGILL|worker process has failed to exit|Call retries were exceeded|terminated by another process|exited unexpectedly/i;

const crashed = [];
const failed = [];
for (const suite of results.testResults ?? []) {
  if (suite.status !== 'failed') continue;
  const assertions = (suite.assertionResults ?? []).filter((a) => a.status === 'failed').length;
  const text = `${suite.testExecError?.message ?? ''}\n${suite.message ?? suite.failureMessage ?? ''}`;
  // The signal names the crash best; else what jest said of the worker.
  const why = /signal=SIG[A-Z]+/.exec(text)?.[0] ?? CRASH.exec(text)?.[0];
  if (assertions === 0 && why) crashed.push({ file: suite.name, why });
  else
    failed.push({
      file: suite.name,
      assertions,
      first:
        text
          .trim()
          .split('\n')
          .find((l) => l.trim()) ?? '',
    });
}

if (failed.length > 0) {
  process.stderr.write(`${failed.length} suite(s) failed an assertion or failed to run (not a crash): CI fails\n`);
  for (const f of failed) process.stderr.write(`  ${f.file}: ${f.assertions} failed assertion(s); ${f.first.slice(0, 200)}\n`);
  process.exit(1);
}
for (const c of crashed) process.stderr.write(`  ${c.file}: its jest worker crashed (${c.why}); run once more\n`);
process.stdout.write(crashed.map((c) => c.file).join('\n') + (crashed.length ? '\n' : ''));

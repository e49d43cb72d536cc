/** The conformance report as text: one row per check with its provider doc page, then a summary. */
import { CHECKS } from './checks';
import { MAX_COMPLETIONS, formatCents } from './cost';
import type { ConformanceReport } from './run';

const LABEL = { pass: 'pass', fail: 'FAIL', skip: 'skip' } as const;

export function formatReport(r: ConformanceReport): string {
  const idWidth = Math.max(...r.results.map((x) => x.id.length));
  const docWidth = Math.max(...r.results.map((x) => CHECKS[x.id].doc.length)) + 'api-reference/'.length;
  const rows = r.results.map((x) =>
    `${LABEL[x.outcome].padEnd(6)}  ${x.id.padEnd(idWidth)}  ${`api-reference/${CHECKS[x.id].doc}`.padEnd(docWidth)}  ${x.detail}`.trimEnd(),
  );
  const count = (o: string) => r.results.filter((x) => x.outcome === o).length;
  const failed = r.results.filter((x) => x.outcome === 'fail').map((x) => x.id);
  const skipped = count('skip');
  const lines = [
    `${'RESULT'}  ${'CHECK'.padEnd(idWidth)}  ${'PROVIDER DOC (Overshoot-ai/docs)'.padEnd(docWidth)}  DETAIL`,
    ...rows,
    '',
    `${r.results.length} checks: ${count('pass')} passed, ${failed.length} failed, ${skipped} skipped` +
      (skipped ? ' (a skipped check verified nothing)' : ''),
    `completions: ${r.completions} (at most ${MAX_COMPLETIONS}); cost of the answered ones on ${r.model ?? '?'}'s pricing: ${formatCents(r.spentMicrocents)}` +
      (r.balanceBeforeMicrocents !== undefined && r.balanceAfterMicrocents !== undefined
        ? `; balance ${formatCents(r.balanceBeforeMicrocents)} → ${formatCents(r.balanceAfterMicrocents)}`
        : ''),
    r.streamId === undefined
      ? 'stream: none created'
      : `stream ${r.streamId}: ${r.streamDeleted ? 'deleted' : 'NOT deleted (its lease ends it)'}`,
    r.interrupted
      ? 'INTERRUPTED: the run was stopped before it finished'
      : failed.length
        ? `NOT CONFORMANT: ${failed.join(', ')}`
        : 'CONFORMANT: every check that ran passed',
  ];
  return `${lines.join('\n')}\n`;
}

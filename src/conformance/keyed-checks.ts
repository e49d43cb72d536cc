/** The checks of the key itself and of keyed reads (no cost but one completion on a stream that does not exist). */
import { randomBytes, randomUUID } from 'node:crypto';
import { UpstreamError } from '../upstream/client';
import { describeBody } from '../upstream/errors';
import { formatCents } from './cost';
import type { RunContext } from './run-context';
import { describe, shapeProblems } from './shapes';
import { errorText, expectStreamError } from './verdicts';
import type { Finding } from './verdicts';

/** Key checks and the balance (keyed reads, no cost). */
export async function keyedChecks(run: RunContext): Promise<void> {
  await run.check('key.wrong', () => wrongKey(run));
  await run.check('balance', () => balance(run));
  await run.check('errors.read-not-found', () => readNotFound(run));
  if (run.model === undefined) run.record('errors.stream-not-found', 'skip', 'no ready model');
  else {
    await run.check('errors.stream-not-found', async () => {
      const err = await run.complete(run.imageRequest(randomUUID(), 'frame_index=-1')).then(
        () => undefined,
        (e: unknown) => e,
      );
      return expectStreamError(err, [404], 'stream_not_found');
    });
  }
}

/** A well-formed key the upstream does not know: 401 with a message, on a billing and on a stream read. */
async function wrongKey(run: RunContext): Promise<{ problems: string[]; detail: string }> {
  const wrong = `${run.brand.keyPrefix}conformance-${randomBytes(12).toString('hex')}`;
  const problems: string[] = [];
  const calls: [string, () => Promise<unknown>][] = [
    ['GET /billing/accounts/me/balance', () => run.client.balance(wrong, run.call)],
    ['GET /v1beta/streams/{id}', () => run.client.getStream(wrong, randomUUID(), run.call)],
  ];
  for (const [what, call] of calls) {
    const err = await call().then(
      () => undefined,
      (e: unknown) => e,
    );
    if (err === undefined) problems.push(`${what} accepted a wrong key`);
    else if (!(err instanceof UpstreamError) || err.status !== 401) problems.push(`${what}: expected 401, got ${errorText(err)}`);
    else if (!describeBody(err.body).message)
      problems.push(`${what}: the 401 body has no message the gateway reads: ${describe(err.body)}`);
  }
  return { problems, detail: '401 on the balance and on a stream read' };
}

/** The balance, kept for the report's before/after figures. */
async function balance(run: RunContext): Promise<{ problems: string[]; detail: string }> {
  const b = await run.client.balance(run.key, run.call);
  const problems = shapeProblems(b, { user_id: 'string', balance_microcents: 'int', balance_cents: 'int|number' });
  if (typeof b.balance_microcents === 'number') run.balanceBefore = b.balance_microcents;
  const short = run.estimate && typeof b.balance_microcents === 'number' && b.balance_microcents < run.estimate.microcents;
  return {
    problems,
    detail: `${formatCents(b.balance_microcents)} available${short ? ' (less than the estimate: completions may get 402)' : ''}`,
  };
}

async function readNotFound(run: RunContext): Promise<string[] | Finding> {
  const err = await run.client.getStream(run.key, randomUUID(), run.call).then(
    () => undefined,
    (e: unknown) => e,
  );
  if (err === undefined) return ['a stream that does not exist was read'];
  if (!(err instanceof UpstreamError) || err.status !== 404) return [`expected 404, got ${errorText(err)}`];
  const parsed = describeBody(err.body);
  if (!parsed.message && !parsed.code) return [`the 404 body is in no shape the gateway reads: ${describe(err.body)}`];
  return { problems: [], detail: parsed.stream ? `nested shape, code ${parsed.code ?? '(none)'}` : '{detail: string}' };
}

/** The checks of the one stream the kit creates: create, read, regions, keepalive, viewer token, WHIP, frames, delete. */
import { isRecord } from '../lib/is-record';
import { UpstreamError } from '../upstream/client';
import type { CreateStreamResponse } from '../upstream/client';
import { describeBody, httpError } from '../upstream/errors';
import type { CheckId } from './checks';
import { completionChecks } from './completion-checks';
import { firstFrames } from './first-frames';
import type { RunContext } from './run-context';
import { UUID_RE, describe, problem, shapeProblems } from './shapes';
import { createProblems, errorText, parseLenient, readProblems } from './verdicts';
import type { Finding } from './verdicts';
import { whipVerdict } from './whip';

const REGIONS = ['us-west1', 'us-central1'] as const;

/** The checks that need the stream's frames (skipped together when none came). */
const FRAME_CHECKS: CheckId[] = [
  'completion.clip',
  'completion.frame',
  'prompt-cache',
  'completion.sse',
  'reference.future-frame',
  'reference.repeated-key',
];

/** Every check that needs the stream (skipped together when there is none). */
const STREAM_CHECKS: CheckId[] = [
  'stream.create',
  'stream.read',
  'region.echo',
  'region.wrong',
  'stream.keepalive',
  'viewer-token',
  'room.whip',
  'frames.first',
  ...FRAME_CHECKS,
  'stream.delete',
  'stream.after-delete',
];

/** Everything that needs the one stream; the stream is deleted by `cleanUp` whatever happens here. */
export async function streamChecks(run: RunContext): Promise<void> {
  run.checkAborted();
  const made = await createStream(run);
  if (!made) return;
  const { id, created, createOk } = made;
  run.checkAborted();

  await readStream(run, id);
  await regions(run, id);
  await run.check('stream.keepalive', () => keepalive(run, id, created));
  await run.check('viewer-token', () => viewerToken(run, id));
  // Before any publisher joins: the synthetic WHIP session uses the stream's publish identity.
  await run.check('room.whip', async () => {
    const publish = created.publish;
    if (!isRecord(publish) || typeof publish.url !== 'string' || typeof publish.token !== 'string') {
      return { problems: [], skip: 'the create response has no publish url and token' };
    }
    return whipVerdict(publish.url, publish.token, run.signal);
  });

  const frames = await firstFrames(run, id, createOk ? created : undefined);
  if (!frames) run.skipAll(FRAME_CHECKS, 'no frames (see frames.first)');
  else if (run.model === undefined) run.skipAll(FRAME_CHECKS, 'no ready model');
  else await completionChecks(run, id, frames);

  await run.stopPublisher();
  run.checkAborted();
  if (await deleteStream(run, id)) await run.check('stream.after-delete', () => afterDelete(run, id));
}

/**
 * `stream.create`: the stream, its id and whether the create answer passed; undefined (every stream
 * check skipped) when there is no stream or no usable id.
 */
async function createStream(run: RunContext): Promise<{ id: string; created: CreateStreamResponse; createOk: boolean } | undefined> {
  run.progress('creating one stream');
  let created: CreateStreamResponse;
  try {
    // Not abortable: a create cut off in flight could leave a stream whose id the kit never learns.
    created = await run.client.createStream(run.key);
  } catch (err) {
    run.checkAborted();
    run.record('stream.create', 'fail', errorText(err));
    run.skipAll(STREAM_CHECKS, 'no stream');
    return undefined;
  }
  const id = typeof created.id === 'string' && UUID_RE.test(created.id) ? created.id : undefined;
  run.streamId = id;
  run.created = created;
  if (id) run.progress(`stream ${id} created`);
  const createOk = run.verdict(
    'stream.create',
    createProblems(created, run.brand),
    `ttl ${describe(created.ttl_seconds)} s, publish ${describe(created.publish?.type)}`,
  );
  if (!id) {
    run.skipAll(STREAM_CHECKS, 'the create response has no usable id');
    return undefined;
  }
  return { id, created, createOk };
}

async function readStream(run: RunContext, id: string): Promise<void> {
  try {
    const stream = await run.client.getStream(run.key, id, run.call);
    run.verdict('stream.read', readProblems(stream, id), `state ${stream.state}, last_frame_at_ms ${describe(stream.last_frame_at_ms)}`);
  } catch (err) {
    run.checkAborted();
    run.record('stream.read', 'fail', errorText(err));
  }
}

async function keepalive(run: RunContext, id: string, created: CreateStreamResponse): Promise<{ problems: string[]; detail: string }> {
  const ka = await run.client.keepalive(run.key, id, run.call);
  const problems = [
    ...shapeProblems(ka, { expires_at_ms: 'int', publish: 'object' }),
    ...problem(
      isRecord(ka.publish) && typeof ka.publish.token === 'string' && ka.publish.token !== '',
      'publish.token should be a non-empty string',
    ),
    ...problem(
      ka.stream_time_ms === undefined || typeof ka.stream_time_ms === 'number',
      `stream_time_ms should be a number, got ${describe(ka.stream_time_ms)}`,
    ),
    ...problem(typeof created.expires_at_ms !== 'number' || ka.expires_at_ms >= created.expires_at_ms, 'expires_at_ms moved backwards'),
  ];
  return {
    problems,
    detail: `expires_at_ms +${typeof created.expires_at_ms === 'number' ? ka.expires_at_ms - created.expires_at_ms : '?'} ms`,
  };
}

/** `stream.delete`: true when the stream is gone (`stream.after-delete` then runs), else that check is skipped. */
async function deleteStream(run: RunContext, id: string): Promise<boolean> {
  run.progress(`deleting stream ${id}`);
  try {
    const d = await run.client.deleteStream(run.key, id, run.call);
    run.deleted = true;
    run.verdict('stream.delete', [
      ...problem(!d.alreadyGone, 'answered 404: the stream was already gone'),
      ...problem(d.id === id, `id should be ${id}, got ${describe(d.id)}`),
    ]);
    return true;
  } catch (err) {
    run.checkAborted();
    run.record('stream.delete', 'fail', errorText(err));
    run.record('stream.after-delete', 'skip', 'the delete failed');
    return false;
  }
}

/** `region.echo`, then `region.wrong`, which holds the one accepted region to the echoed one. */
async function regions(run: RunContext, id: string): Promise<void> {
  const echoed: { region?: string } = {};
  await run.check('region.echo', () => regionEcho(run, id, echoed));
  await run.check('region.wrong', () => regionWrong(run, id, echoed.region));
}

async function regionEcho(run: RunContext, id: string, echoed: { region?: string }): Promise<string[] | Finding> {
  const res = await run.raw('GET', `/v1beta/streams/${id}`);
  if (res.status !== 200) return [`GET stream: ${errorText(httpError(res.status, parseLenient(res.text), undefined))}`];
  const value = res.headers.get(run.brand.regionHeaderDisplay);
  if (value === null) {
    let other: string | undefined;
    res.headers.forEach((_v, h) => (other ??= /^x-.+-region$/i.test(h) ? h : undefined));
    return [`no ${run.brand.regionHeaderDisplay} header${other ? ` (the upstream sends ${other}: check the brand configuration)` : ''}`];
  }
  echoed.region = value;
  return {
    problems: problem((REGIONS as readonly string[]).includes(value), `unknown region ${JSON.stringify(value)}`),
    detail: `${run.brand.regionHeaderDisplay}: ${value}`,
  };
}

async function regionWrong(run: RunContext, id: string, serving: string | undefined): Promise<Finding> {
  const outcomes = [];
  for (const region of REGIONS) {
    const err = await run.client.getStream(run.key, id, { ...run.call, region }).then(
      () => undefined,
      (e: unknown) => e,
    );
    outcomes.push({ region, err });
  }
  const ok = outcomes.filter((o) => o.err === undefined);
  const refused = outcomes.filter((o) => o.err !== undefined);
  const problems: string[] = [];
  if (ok.length !== 1)
    problems.push(
      ok.length === 0 ? 'no region was accepted' : `every region was accepted (${REGIONS.join(', ')}): no 409 for a wrong region`,
    );
  if (serving && ok.length === 1 && ok[0]!.region !== serving)
    problems.push(`${ok[0]!.region} was accepted but the echoed region is ${serving}`);
  for (const { region, err } of refused) {
    const parsed = err instanceof UpstreamError ? describeBody(err.body) : undefined;
    if (!(err instanceof UpstreamError) || err.status !== 409 || parsed?.code !== 'region_error')
      problems.push(`${region}: expected 409 region_error, got ${errorText(err)}`);
  }
  return { problems, detail: `${ok.map((o) => o.region).join('') || '-'} 200, ${refused.map((o) => o.region).join(', ') || '-'} 409` };
}

async function viewerToken(run: RunContext, id: string): Promise<{ problems: string[]; detail: string }> {
  const res = await run.raw('POST', `/v1beta/streams/${id}/viewer-token`, {});
  if (res.status === 404 || res.status === 405) {
    return { problems: [`not served: HTTP ${res.status} ${describeBody(parseLenient(res.text)).message ?? ''}`.trim()], detail: '' };
  }
  if (res.status < 200 || res.status > 299)
    return { problems: [errorText(httpError(res.status, parseLenient(res.text), undefined))], detail: '' };
  const body = parseLenient(res.text);
  if (!isRecord(body)) return { problems: ['the body is not a JSON object'], detail: '' };
  const view = body.view;
  const problems = [...shapeProblems(view, { url: 'string', token: 'string', expires_in_seconds: 'int' }, 'view.')];
  if (isRecord(view)) {
    problems.push(
      ...problem(typeof view.url !== 'string' || /^wss?:\/\//.test(view.url), `view.url should be ws(s)://, got ${describe(view.url)}`),
    );
    problems.push(
      ...problem(typeof view.expires_in_seconds !== 'number' || view.expires_in_seconds > 0, 'view.expires_in_seconds should be positive'),
    );
  }
  return { problems, detail: isRecord(view) ? `expires in ${describe(view.expires_in_seconds)} s` : '' };
}

async function afterDelete(run: RunContext, id: string): Promise<string[]> {
  const problems: string[] = [];
  const ka = await run.client.keepalive(run.key, id, run.call).then(
    () => undefined,
    (e: unknown) => e,
  );
  if (ka === undefined) problems.push('keepalive renewed a deleted stream');
  else if (!(ka instanceof UpstreamError) || ka.status !== 404) problems.push(`keepalive: expected 404, got ${errorText(ka)}`);
  try {
    const s = await run.client.getStream(run.key, id, run.call);
    if (s.state !== 'ended' || s.end_reason !== 'deleted')
      problems.push(`read: expected state ended, end_reason deleted, got ${describe(s.state)}, ${describe(s.end_reason)}`);
  } catch (err) {
    if (!(err instanceof UpstreamError) || err.status !== 404)
      problems.push(`read: expected the ended stream or 404, got ${errorText(err)}`);
  }
  if (run.model !== undefined) {
    const err = await run.complete(run.imageRequest(id, 'frame_index=-1')).then(
      () => undefined,
      (e: unknown) => e,
    );
    if (err === undefined) problems.push('a completion on the deleted stream was answered');
    else if (!(err instanceof UpstreamError) || err.status !== 404) problems.push(`completion: expected 404, got ${errorText(err)}`);
  }
  try {
    await run.client.deleteStream(run.key, id, run.call);
  } catch (err) {
    problems.push(`a second delete failed (delete is idempotent): ${errorText(err)}`);
  }
  return problems;
}

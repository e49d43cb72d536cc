/** The completion checks on the stream's frames: a clip, a frame, the prompt cache, SSE, and two reference errors. */
import { isRecord } from '../lib/is-record';
import { costMicrocents } from '../lib/wire';
import { cacheInfo } from '../upstream/client';
import type { ChatCompletionRequest, ChatCompletionResponse, Stream } from '../upstream/client';
import { httpError } from '../upstream/errors';
import { CLIP_FPS, CLIP_MS, OUTPUT_CAP } from './cost';
import { PROMPT } from './run-context';
import type { RunContext } from './run-context';
import { describe, problem, shapeProblems } from './shapes';
import { checkSse } from './sse';
import { completionProblems, errorText, expectStreamError, parseLenient, readingOf, repeatedKeyVerdict } from './verdicts';
import type { Finding } from './verdicts';

/** Every check that needs the stream's frames and a model: at most `MAX_COMPLETIONS` completions in all. */
export async function completionChecks(run: RunContext, id: string, stream: Stream): Promise<void> {
  const threadId = `conformance-${id}`;
  let clip: ChatCompletionResponse | undefined;
  await run.check('completion.clip', async () => {
    clip = await run.complete(clipRequest(run, id, threadId));
    return completionVerdict(run, clip);
  });
  if (!clip) run.record('prompt-cache', 'skip', 'no clip completion');
  else {
    const response = clip;
    await run.check('prompt-cache', async () => cacheVerdict(run, response, threadId));
  }
  await run.check('completion.frame', async () => completionVerdict(run, await run.complete(run.imageRequest(id, 'frame_index=-1'))));
  await run.check('completion.sse', () => sse(run, id));
  await run.check('reference.future-frame', async () => {
    const future = (stream.last_frame_index ?? 0) + 1_000_000;
    const err = await run.complete(run.imageRequest(id, `frame_index=${future}`)).then(
      () => undefined,
      (e: unknown) => e,
    );
    // The contract says 422; the provider's error page lists 409 for this code.
    const verdict = expectStreamError(err, [422, 409], 'frame_not_yet_produced');
    return { ...verdict, detail: `${verdict.detail}; ${readingOf(err)}` };
  });
  await run.check('reference.repeated-key', async () => {
    const err = await run.complete(run.imageRequest(id, 'frame_index=-1&frame_index=-1')).then(
      () => undefined,
      (e: unknown) => e,
    );
    return repeatedKeyVerdict(err);
  });
}

/** A clip of the last `CLIP_MS` at `CLIP_FPS`, on a thread (what `prompt-cache` then reads). */
function clipRequest(run: RunContext, id: string, threadId: string): ChatCompletionRequest {
  const clipUrl = `${run.brand.scheme}://streams/${id}?start_offset_ms=-${CLIP_MS}&max_fps=${CLIP_FPS}`;
  return {
    model: run.model!,
    messages: [
      {
        role: 'user',
        content: [
          { type: 'text', text: PROMPT },
          { type: 'video_url', video_url: { url: clipUrl } },
        ],
      },
    ],
    max_completion_tokens: OUTPUT_CAP,
    thread_id: threadId,
    stream: false,
  };
}

function completionVerdict(run: RunContext, r: ChatCompletionResponse): { problems: string[]; detail: string } {
  const problems = completionProblems(r);
  const choice: unknown = Array.isArray(r.choices) ? r.choices[0] : undefined;
  const usage = r.usage as unknown;
  const cost = run.charge(r);
  const content = isRecord(choice) && isRecord(choice.message) && typeof choice.message.content === 'string' ? choice.message.content : '';
  const tokens = isRecord(usage) ? `${describe(usage.prompt_tokens)} in / ${describe(usage.completion_tokens)} out tokens, ${cost} µ¢` : '';
  return { problems, detail: `${tokens}; "${content.slice(0, 40)}${content.length > 40 ? '…' : ''}"` };
}

function cacheVerdict(run: RunContext, r: ChatCompletionResponse, threadId: string): Finding {
  const field = run.brand.responseField;
  const cache = cacheInfo(r, run.brand);
  if (!cache) {
    const elsewhere = Object.keys(r).find((k) => isRecord(r[k]) && isRecord((r[k] as Record<string, unknown>).cache));
    if (elsewhere)
      return {
        problems: [`the cache details are under ${JSON.stringify(elsewhere)}, not ${JSON.stringify(field)}: check the brand configuration`],
        detail: '',
      };
    // The contract lets a response leave them out: nothing to hold the upstream to.
    return { problems: [], skip: `no ${field}.cache in the response (the contract allows that)` };
  }
  const problems = [
    ...shapeProblems(cache, { thread_id: 'string|null', cache_hit: 'boolean', cached_input_tokens: 'int' }, `${field}.cache.`),
    ...problem(
      cache.thread_id === threadId,
      `${field}.cache.thread_id should echo ${JSON.stringify(threadId)}, got ${describe(cache.thread_id)}`,
    ),
  ];
  return { problems, detail: `${field}.cache: hit ${describe(cache.cache_hit)}, ${describe(cache.cached_input_tokens)} cached tokens` };
}

async function sse(run: RunContext, id: string): Promise<{ problems: string[]; detail: string }> {
  run.count();
  const body = { ...run.imageRequest(id, 'frame_index=-1'), stream: true, stream_options: { include_usage: true } };
  const res = await run.raw('POST', '/v1beta/chat/completions', body);
  if (res.status !== 200) return { problems: [errorText(httpError(res.status, parseLenient(res.text), undefined))], detail: '' };
  const v = checkSse(res.headers.get('content-type'), res.text);
  if (v.usage && run.price) run.spent += costMicrocents(run.price, v.usage);
  return {
    problems: v.problems,
    detail: `${v.chunks} chunks${v.usage ? ', usage chunk' : ''}; "${v.text.slice(0, 30)}${v.text.length > 30 ? '…' : ''}"`,
  };
}

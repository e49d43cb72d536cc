/**
 * What the passthrough relies on in a streamed chat completion (`stream: true`): an event stream
 * of `data:` events, each an OpenAI-style chunk, ending with `data: [DONE]`.
 */
import { isRecord } from '../lib/is-record';

export interface SseVerdict {
  problems: string[];
  /** Chunks (JSON events before [DONE]). */
  chunks: number;
  /** The usage object of the last chunk that carried one. */
  usage?: { prompt_tokens: number; completion_tokens: number };
  /** The streamed text, assembled from the deltas. */
  text: string;
}

/** Checks a complete event-stream body (and its content type). */
export function checkSse(contentType: string | null, body: string): SseVerdict {
  const problems: string[] = [];
  if (!/^text\/event-stream\b/i.test(contentType ?? ''))
    problems.push(`content-type should be text/event-stream, got ${JSON.stringify(contentType)}`);
  const events = body
    .replace(/\r\n?/g, '\n')
    .split(/\n\n+/)
    .map((e) => e.trim())
    .filter((e) => e !== '');
  const data: string[] = [];
  for (const event of events) {
    const lines = event.split('\n').filter((l) => !l.startsWith(':'));
    if (lines.length === 0) continue; // a comment (keep-alive) event
    const bad = lines.find((l) => !/^data: ?/.test(l) && !/^(event|id|retry):/.test(l));
    if (bad !== undefined) {
      problems.push(`an event line is neither data: nor a comment: ${JSON.stringify(bad.slice(0, 60))}`);
      continue;
    }
    data.push(
      lines
        .filter((l) => l.startsWith('data:'))
        .map((l) => l.replace(/^data: ?/, ''))
        .join('\n'),
    );
  }
  let chunks = 0;
  let text = '';
  let usage: SseVerdict['usage'];
  const doneAt = data.indexOf('[DONE]');
  if (doneAt === -1) problems.push('no data: [DONE] event');
  else if (doneAt !== data.length - 1) problems.push('events follow data: [DONE]');
  for (const d of doneAt === -1 ? data : data.slice(0, doneAt)) {
    let chunk: unknown;
    try {
      chunk = JSON.parse(d);
    } catch {
      problems.push(`a data: event is not JSON: ${JSON.stringify(d.slice(0, 60))}`);
      continue;
    }
    chunks++;
    if (!isRecord(chunk) || chunk.object !== 'chat.completion.chunk' || !Array.isArray(chunk.choices)) {
      problems.push(`a chunk is not {object: "chat.completion.chunk", choices: [...]}: ${JSON.stringify(d.slice(0, 60))}`);
      continue;
    }
    for (const choice of chunk.choices) {
      const content = isRecord(choice) && isRecord(choice.delta) ? choice.delta.content : undefined;
      if (typeof content === 'string') text += content;
    }
    if (isRecord(chunk.usage) && typeof chunk.usage.prompt_tokens === 'number' && typeof chunk.usage.completion_tokens === 'number') {
      usage = { prompt_tokens: chunk.usage.prompt_tokens, completion_tokens: chunk.usage.completion_tokens };
    }
  }
  if (chunks === 0) problems.push('no chunk before [DONE]');
  return { problems: [...new Set(problems)], chunks, usage, text };
}

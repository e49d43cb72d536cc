/**
 * Forwards a completion to any OpenAI-compatible vision server (Ollama, vLLM, llama.cpp server):
 * text parts as text, resolved frames as base64 JPEG data-URL `image_url` parts. Its failures
 * become the contract's 503 with the stream error shape (and the `upstream` object when it answered).
 */
import { ServiceError } from '../../lib/errors';
import type { ModelBackend, ModelMessage, ModelRequest, ModelResult, ResponseFormat } from './backend';
import { isRecord } from '../../lib/is-record';

export interface OpenAIBackendOptions {
  /** `provider` of the upstream object in errors. */
  provider: string;
  /** Base URL ending before `/chat/completions` (e.g. `http://127.0.0.1:11434/v1`). */
  baseUrl: string;
  remoteModel: string;
  apiKey?: string;
  timeoutMs: number;
}

type WirePart = { type: 'text'; text: string } | { type: 'image_url'; image_url: { url: string } };

/** Upstream body kept in errors is capped: a misbehaving server must not bloat our answers. */
const MAX_ERROR_BODY_CHARS = 4000;

export class OpenAIBackend implements ModelBackend {
  private readonly endpoint: string;

  constructor(private readonly opts: OpenAIBackendOptions) {
    this.endpoint = `${opts.baseUrl.replace(/\/+$/, '')}/chat/completions`;
  }

  async complete(req: ModelRequest): Promise<ModelResult> {
    const body: Record<string, unknown> = {
      model: this.opts.remoteModel,
      messages: req.messages.map(toWireMessage),
      stream: false,
    };
    if (req.maxOutputTokens !== undefined) body.max_tokens = req.maxOutputTokens;
    if (req.responseFormat) body.response_format = toWireFormat(req.responseFormat);
    if (req.tools !== undefined) body.tools = req.tools;
    if (req.toolChoice !== undefined) body.tool_choice = req.toolChoice;
    if (req.parallelToolCalls !== undefined) body.parallel_tool_calls = req.parallelToolCalls;

    const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json' };
    if (this.opts.apiKey) headers.authorization = `Bearer ${this.opts.apiKey}`;
    const timeout = AbortSignal.timeout(this.opts.timeoutMs);
    let res: Response;
    let text: string;
    try {
      res = await fetch(this.endpoint, {
        method: 'POST',
        headers,
        body: JSON.stringify(body),
        signal: AbortSignal.any([req.signal, timeout]),
      });
      text = await res.text();
    } catch (err) {
      if (req.signal.aborted) throw err; // the client went away: nobody to answer
      const why = timeout.aborted ? `timed out after ${this.opts.timeoutMs} ms` : `unreachable (${(err as Error).message})`;
      throw new ServiceError(503, 'model_unavailable', `Model server for ${this.opts.remoteModel} ${why}`, {
        shape: 'stream',
        cause: err,
      });
    }

    const parsed = parseJson(text);
    const upstream = {
      provider: this.opts.provider,
      status: res.status,
      body: isRecord(parsed) ? parsed : { text: text.slice(0, MAX_ERROR_BODY_CHARS) },
      rate_limits: rateLimits(res.headers),
    };
    if (!res.ok) {
      const retryAfter = res.headers.get('retry-after');
      throw new ServiceError(503, `upstream_http_${res.status}`, `Model server answered HTTP ${res.status}`, {
        shape: 'stream',
        upstream,
        ...(retryAfter ? { headers: { 'retry-after': retryAfter } } : {}),
      });
    }
    const choice = isRecord(parsed) && Array.isArray(parsed.choices) ? (parsed.choices[0] as unknown) : undefined;
    const message = isRecord(choice) && isRecord(choice.message) ? choice.message : undefined;
    const content = message?.content;
    if (!message || (content !== null && content !== undefined && typeof content !== 'string')) {
      throw new ServiceError(503, 'model_unavailable', 'Model server answered without a usable choice', { shape: 'stream', upstream });
    }
    return {
      text: typeof content === 'string' ? content : '',
      ...(isRecord(choice) && typeof choice.finish_reason === 'string' ? { finishReason: choice.finish_reason } : {}),
      ...(Array.isArray(message.tool_calls) ? { toolCalls: message.tool_calls as unknown[] } : {}),
    };
  }
}

function toWireMessage(m: ModelMessage): { role: string; content: string | WirePart[] } {
  const only = m.parts.length === 1 ? m.parts[0] : undefined;
  if (only?.type === 'text') return { role: m.role, content: only.text };
  const content: WirePart[] = [];
  for (const p of m.parts) {
    if (p.type === 'text') {
      content.push({ type: 'text', text: p.text });
      continue;
    }
    const { context } = p;
    if (context.kind === 'video') {
      // Label each clip so a model can keep several streams apart (separate visual contexts).
      const first = context.frames[0]!;
      const lastF = context.frames[context.frames.length - 1]!;
      const spanS = ((lastF.streamTimeMs - first.streamTimeMs) / 1000).toFixed(1);
      content.push({
        type: 'text',
        text: `Video from stream ${context.streamId}: ${context.frames.length} frames in order over ${spanS} s.`,
      });
    }
    for (const f of context.frames) {
      content.push({ type: 'image_url', image_url: { url: `data:image/jpeg;base64,${f.jpeg.toString('base64')}` } });
    }
  }
  return { role: m.role, content };
}

function toWireFormat(f: ResponseFormat): unknown {
  if (f.type === 'json_object') return { type: 'json_object' };
  return {
    type: 'json_schema',
    json_schema: { name: f.name ?? 'response', schema: f.schema, ...(f.strict !== undefined ? { strict: f.strict } : {}) },
  };
}

/** `x-ratelimit-remaining-requests: 9` → `{remaining_requests: 9}`. */
function rateLimits(headers: Headers): Record<string, string | number> {
  const out: Record<string, string | number> = {};
  headers.forEach((value, name) => {
    const m = /^x-ratelimit-(.+)$/i.exec(name);
    if (!m) return;
    const n = Number(value);
    out[m[1]!.toLowerCase().replaceAll('-', '_')] = value !== '' && Number.isFinite(n) ? n : value;
  });
  return out;
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

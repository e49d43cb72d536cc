/**
 * `POST /v1beta/chat/completions`: validate, take an injected fault, check the model, resolve the
 * stream references, check the balance, run the model, bill, answer as JSON or SSE.
 *
 * Order of checks (each one an error before any byte is written): 401 auth → 429 rate limit → 422
 * body, references syntax and image hosts → injected fault → 404 unknown model / 503 model not ready
 * → 402 empty balance → 422 request images (decoded, fetched) → 404/403 streams, 422 frames → 402
 * balance below the input cost → 503 model failure.
 */
import { randomBytes } from 'node:crypto';
import { setImmediate as nextTick, setTimeout as sleep } from 'node:timers/promises';
import express from 'express';
import type { Request, Response, Router } from 'express';
import { ServiceError, streamError } from '../lib/errors';
import type { Account } from './accounts';
import { costMicrocents } from './billing';
import { completionRequestParser } from './completion-request';
import type { CompletionRequest, RequestPart } from './completion-request';
import type { EmulatorContext } from './context';
import type { FaultSpec } from './faults';
import { accountOf, requireAccount } from './http';
import { loadImage } from './images';
import type { RequestImage } from './images';
import type { ModelMessage, ModelResult, VisualContext } from './models/backend';
import { ModelLatency } from './models/latency';
import { PromptCache, unitKey } from './prompt-cache';
import type { PromptUnit } from './prompt-cache';
import { rateLimit, rateLimited } from './rate-limit';
import { resolveImage, resolveVideo } from './references';

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

interface Resolved {
  messages: ModelMessage[];
  contexts: VisualContext[];
  prompt: string;
  textChars: number;
  frameCount: number;
  units: PromptUnit[];
}

interface Answer {
  id: string;
  created: number;
  model: string;
  content: string;
  toolCalls: unknown[];
  finishReason: string;
  usage: Usage;
  /**
   * `{cache: {...}}` under brand.responseField: when a thread_id was given; in the provider's
   * dialect always, `thread_id: null` without one (its prompt-cache page).
   */
  extra: Record<string, unknown>;
}

export function completionsRouter(ctx: EmulatorContext): Router {
  const r = express.Router();
  const cfg = ctx.cfg.emulator;
  const parse = completionRequestParser({
    scheme: ctx.brand.scheme,
    tokensPerFrameField: cfg.tokensPerFrameField,
    defaultTokensPerFrame: cfg.tokensPerFrame,
    imageAllowedHosts: cfg.imageFetch.allowedHosts,
    dialect: cfg.dialect,
  });
  const cache = new PromptCache();
  const latency = new ModelLatency(cfg.modelLatencySeed);
  const tokensOfChars = (chars: number) => Math.ceil(chars / cfg.charsPerToken);

  r.post('/chat/completions', requireAccount(ctx), rateLimit(ctx), async (req: Request, res: Response) => {
    const account = accountOf(res);
    const creq = parse(req.body);

    // The client going away aborts the work (model call, latency, SSE writing).
    const abort = new AbortController();
    res.on('close', () => {
      if (!res.writableFinished) abort.abort();
    });

    const fault = ctx.faults.take(creq.model);
    if (fault && !(await applyFault(fault, req, abort.signal, ctx))) return;

    const model = ctx.models.get(creq.model);
    const pricing = ctx.models.pricing(creq.model);
    const backend = ctx.models.backendFor(creq.model);
    if (!model || !pricing || !backend) {
      throw streamError(404, 'model_not_found', `Model ${JSON.stringify(creq.model)} does not exist; see GET /v1beta/models`);
    }
    if (model.status !== 'ready') {
      throw streamError(503, 'model_unavailable', `Model ${creq.model} is ${model.status}; retry later or use another ready model`);
    }
    if ((ctx.accounts.get(account.id)?.balanceMicrocents ?? 0) <= 0) throw billingDenied(0);

    let images: RequestImages;
    try {
      images = await loadRequestImages(ctx, creq, abort.signal);
    } catch (err) {
      if (abort.signal.aborted) return;
      throw err;
    }
    if (abort.signal.aborted) return;
    const resolved = resolveReferences(ctx, account, creq, ctx.now(), images);

    const promptTokens = tokensOfChars(resolved.textChars) + resolved.frameCount * creq.tokensPerFrame;
    const unitKeys = resolved.units.map(unitKey);
    const cacheKey = creq.threadId ? PromptCache.key(account.id, creq.threadId, creq.model) : undefined;
    const prefix = cacheKey ? cache.commonPrefix(cacheKey, unitKeys) : 0;
    const cachedTokens = Math.min(promptTokens, prefixTokens(resolved.units.slice(0, prefix), tokensOfChars));

    const inputCost = costMicrocents(pricing, { prompt_tokens: promptTokens, completion_tokens: 0 }, cachedTokens);
    if (!ctx.accounts.canPay(account.id, inputCost)) throw billingDenied(inputCost);

    let result: ModelResult;
    try {
      result = await backend.complete({
        messages: resolved.messages,
        prompt: resolved.prompt,
        contexts: resolved.contexts,
        ...(creq.responseFormat ? { responseFormat: creq.responseFormat } : {}),
        ...(creq.maxOutputTokens !== undefined ? { maxOutputTokens: creq.maxOutputTokens } : {}),
        ...(creq.tools ? { tools: creq.tools } : {}),
        ...(creq.toolChoice !== undefined ? { toolChoice: creq.toolChoice } : {}),
        ...(creq.parallelToolCalls !== undefined ? { parallelToolCalls: creq.parallelToolCalls } : {}),
        signal: abort.signal,
      });
    } catch (err) {
      if (abort.signal.aborted) return;
      if (err instanceof ServiceError) throw err;
      ctx.logger.error({ err, model: creq.model }, 'model backend failed');
      throw streamError(503, 'model_unavailable', `Model ${creq.model} failed to answer`);
    }
    // The answer takes as long as a hosted model's would (`emulator.modelLatency`; none by default).
    const waitMs = latency.draw(model.latency ?? cfg.modelLatency, resolved.frameCount);
    if (waitMs > 0) await sleep(waitMs, undefined, { signal: abort.signal }).catch(() => undefined);
    // Work stopped because nobody is listening: no answer, no charge.
    if (abort.signal.aborted) return;

    const { text, truncated } = truncate(result.text, creq.maxOutputTokens, cfg.charsPerToken);
    const completionTokens = tokensOfChars(text.length);
    const usage: Usage = {
      prompt_tokens: promptTokens,
      completion_tokens: completionTokens,
      total_tokens: promptTokens + completionTokens,
    };
    const toolCalls = result.toolCalls ?? [];
    const finishReason = truncated ? 'length' : toolCalls.length ? 'tool_calls' : (result.finishReason ?? 'stop');

    ctx.accounts.charge(account.id, costMicrocents(pricing, usage, cachedTokens));
    if (cacheKey) cache.remember(cacheKey, unitKeys);

    const answer: Answer = {
      id: `chatcmpl-${randomBytes(12).toString('hex')}`,
      created: Math.floor(ctx.now() / 1000),
      model: creq.model,
      content: text,
      toolCalls,
      finishReason,
      usage,
      extra:
        creq.threadId || cfg.dialect === 'provider'
          ? {
              [ctx.brand.responseField]: {
                cache: { thread_id: creq.threadId ?? null, cache_hit: cachedTokens > 0, cached_input_tokens: cachedTokens },
              },
            }
          : {},
    };
    if (creq.stream) await sendSse(res, answer, creq.includeUsage, abort.signal);
    else res.json(completionBody(answer));
  });

  return r;
}

const billingDenied = (needed: number) =>
  streamError(
    402,
    'billing_denied',
    needed > 0 ? `Insufficient credits: this request needs ${needed} microcents of input` : 'Insufficient credits',
  );

/**
 * Applies an injected fault. Returns true when the request should go on (latency only),
 * false when it was answered or cut; throws the status fault. A 429 with the default code is the
 * provider's per-user rate limit: `rate_limit_error`, `retry-after` (default 1) and the
 * `x-ratelimit-*` headers of a spent window.
 */
async function applyFault(f: FaultSpec, req: Request, signal: AbortSignal, ctx: EmulatorContext): Promise<boolean> {
  if (f.latencyMs) {
    try {
      await sleep(f.latencyMs, undefined, { signal });
    } catch {
      return false; // client gone while waiting
    }
  }
  if (f.reset) {
    req.socket.destroy();
    return false;
  }
  if (f.status) {
    const code = f.code ?? defaultFaultCode(f.status);
    if (code === 'rate_limit_exceeded' && f.type === undefined) {
      const retryAfter = Math.max(1, Math.ceil(f.retryAfterSeconds ?? 1));
      const limit = Math.max(1, ctx.cfg.emulator.rateLimit.completionsPerSecond);
      const err = rateLimited({ limit, remaining: 0, reset: Math.floor(ctx.now() / 1000) + retryAfter }, retryAfter);
      throw f.message === undefined ? err : new ServiceError(429, code, f.message, err.options);
    }
    throw new ServiceError(f.status, code, f.message ?? `Injected fault: HTTP ${f.status}`, {
      shape: 'stream',
      type: f.type ?? (code.startsWith('upstream_') ? 'upstream_error' : 'stream_error'),
      ...(f.retryAfterSeconds !== undefined ? { headers: { 'retry-after': String(Math.ceil(f.retryAfterSeconds)) } } : {}),
    });
  }
  return true;
}

function defaultFaultCode(status: number): string {
  if (status === 503) return 'model_unavailable';
  if (status === 429) return 'rate_limit_exceeded';
  if (status === 402) return 'billing_denied';
  if (status === 404) return 'stream_not_found';
  return `upstream_http_${status}`;
}

type RequestImages = Map<RequestPart, RequestImage>;

/**
 * Decodes the request's own images (data URLs) and fetches the allowed http(s) ones, one at a time
 * (each bounded in bytes and time); 422 at the first that fails.
 */
async function loadRequestImages(ctx: EmulatorContext, creq: CompletionRequest, signal: AbortSignal): Promise<RequestImages> {
  const out: RequestImages = new Map();
  const cfg = ctx.cfg.emulator;
  for (const m of creq.messages) {
    for (const p of m.parts) {
      if (p.type !== 'image' || signal.aborted) continue;
      out.set(
        p,
        await loadImage(p.source, p.loc, {
          ...cfg.imageFetch,
          storeWidth: cfg.frameStoreWidth,
          jpegQuality: cfg.jpegQuality,
          now: ctx.now(),
          signal,
        }),
      );
    }
  }
  return out;
}

/**
 * Resolves every reference (404 unknown/ended stream, 403 another account's, 422 frames) and the
 * request's own images into visual contexts, and lays out the prompt units the cache compares.
 */
function resolveReferences(ctx: EmulatorContext, account: Account, creq: CompletionRequest, now: number, images: RequestImages): Resolved {
  const out: Resolved = { messages: [], contexts: [], prompt: '', textChars: 0, frameCount: 0, units: [] };
  const texts: string[] = [];
  for (const m of creq.messages) {
    const parts: ModelMessage['parts'] = [];
    for (const p of m.parts) {
      if (p.type === 'text') {
        parts.push({ type: 'text', text: p.text });
        texts.push(p.text);
        out.textChars += p.text.length;
        out.units.push({ kind: 'text', role: m.role, text: p.text });
        continue;
      }
      if (p.type === 'image') {
        const image = images.get(p)!;
        const context: VisualContext = { streamId: '', kind: 'image', frames: [image.frame] };
        parts.push({ type: 'visual', context });
        out.contexts.push(context);
        out.frameCount += 1;
        out.units.push({ kind: 'frame', streamId: `image:${image.digest}`, index: 0, tokensPerFrame: creq.tokensPerFrame });
        continue;
      }
      const { ref } = p;
      const stream = ctx.streams.require(ref.streamId, account);
      if (stream.state !== 'active') throw streamError(404, 'stream_not_found', `Stream ${ref.streamId} has ended`);
      const opts = { dialect: ctx.cfg.emulator.dialect };
      const frames =
        ref.kind === 'image' ? [resolveImage(ref, stream.frames, now, opts)] : resolveVideo(ref, stream.frames, now, p.loc, opts);
      const context: VisualContext = { streamId: ref.streamId, kind: ref.kind, frames };
      parts.push({ type: 'visual', context });
      out.contexts.push(context);
      out.frameCount += frames.length;
      for (const f of frames)
        out.units.push({ kind: 'frame', streamId: ref.streamId, index: f.index, tokensPerFrame: creq.tokensPerFrame });
    }
    out.messages.push({ role: m.role, parts });
  }
  out.prompt = texts.join('\n');
  return out;
}

/** Tokens of a leading run of units, with the same estimate as prompt_tokens. */
function prefixTokens(units: PromptUnit[], tokensOfChars: (chars: number) => number): number {
  let chars = 0;
  let frameTokens = 0;
  for (const u of units) {
    if (u.kind === 'text') chars += u.text.length;
    else frameTokens += u.tokensPerFrame;
  }
  return tokensOfChars(chars) + frameTokens;
}

/** Cuts the output at the token cap (same chars-per-token estimate as usage). */
export function truncate(text: string, maxTokens: number | undefined, charsPerToken: number): { text: string; truncated: boolean } {
  if (maxTokens === undefined || Math.ceil(text.length / charsPerToken) <= maxTokens) return { text, truncated: false };
  let end = maxTokens * charsPerToken;
  // Never split a surrogate pair.
  const code = text.charCodeAt(end - 1);
  if (code >= 0xd800 && code <= 0xdbff) end -= 1;
  return { text: text.slice(0, end), truncated: true };
}

function completionBody(a: Answer): unknown {
  return {
    id: a.id,
    object: 'chat.completion',
    created: a.created,
    model: a.model,
    choices: [{ index: 0, message: { role: 'assistant', content: a.content, tool_calls: a.toolCalls }, finish_reason: a.finishReason }],
    usage: a.usage,
    ...a.extra,
  };
}

/** Splits content into word groups of at least `min` characters; concatenation gives it back. */
export function splitContent(text: string, min = 16): string[] {
  const pieces: string[] = [];
  let cur = '';
  for (const tok of text.match(/\s+|\S+\s*/g) ?? []) {
    cur += tok;
    if (cur.length >= min) {
      pieces.push(cur);
      cur = '';
    }
  }
  if (cur) pieces.push(cur);
  return pieces;
}

/** OpenAI-style SSE: role chunk, content chunks, finish chunk, optional usage chunk, `[DONE]`. */
async function sendSse(res: Response, a: Answer, includeUsage: boolean, signal: AbortSignal): Promise<void> {
  res.status(200);
  res.setHeader('content-type', 'text/event-stream; charset=utf-8');
  res.setHeader('cache-control', 'no-cache, no-transform');
  res.setHeader('connection', 'keep-alive');
  res.setHeader('x-accel-buffering', 'no');
  res.flushHeaders();

  const base = { id: a.id, object: 'chat.completion.chunk', created: a.created, model: a.model };
  const chunk = (delta: Record<string, unknown>, finish: string | null) => ({
    ...base,
    choices: [{ index: 0, delta, finish_reason: finish }],
  });
  const events: unknown[] = [chunk({ role: 'assistant', content: '' }, null)];
  for (const piece of splitContent(a.content)) events.push(chunk({ content: piece }, null));
  if (a.toolCalls.length) {
    events.push(chunk({ tool_calls: a.toolCalls.map((c, index) => ({ index, ...(c as object) })) }, null));
  }
  events.push({ ...chunk({}, a.finishReason), ...a.extra });
  // The provider: the final (usage) chunk carries usage and the cache details.
  if (includeUsage) events.push({ ...base, choices: [], usage: a.usage, ...a.extra });

  for (const e of events) {
    if (signal.aborted || res.destroyed) return;
    if (!res.write(`data: ${JSON.stringify(e)}\n\n`)) await drained(res, signal);
    await nextTick(); // let a client's disconnect be seen between chunks
  }
  if (!signal.aborted && !res.destroyed) res.end('data: [DONE]\n\n');
}

function drained(res: Response, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      res.off('drain', done);
      signal.removeEventListener('abort', done);
      resolve();
    };
    res.on('drain', done);
    signal.addEventListener('abort', done);
  });
}

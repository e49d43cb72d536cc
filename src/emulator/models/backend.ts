/**
 * What a model runner sees of a chat completion, and the one method every runner implements.
 * Completions resolve references into frames first; runners never parse references or bill.
 */
import type { StoredFrame } from '../frames/types';
import { analyze } from './analyzer';
import type { FrameStats } from './frame-stats';
import { JsonSchemaValidators } from '../../lib/json-schema';

/** One resolved reference: the frames of one stream, a separate visual context for the model. */
export interface VisualContext {
  streamId: string;
  kind: 'image' | 'video';
  frames: StoredFrame[];
}

export type ModelPart = { type: 'text'; text: string } | { type: 'visual'; context: VisualContext };

export interface ModelMessage {
  role: string;
  parts: ModelPart[];
}

export type ResponseFormat =
  { type: 'json_schema'; name?: string; schema: Record<string, unknown>; strict?: boolean } | { type: 'json_object' };

export interface ModelRequest {
  messages: ModelMessage[];
  /** Every text of the conversation in order, newline-joined (what the analyzer reads). */
  prompt: string;
  /** Every visual context in order of appearance. */
  contexts: VisualContext[];
  responseFormat?: ResponseFormat;
  /** Output cap; completions also truncate whatever comes back. */
  maxOutputTokens?: number;
  /** OpenAI-style tool fields, passed through to backends that understand them. */
  tools?: unknown;
  toolChoice?: unknown;
  parallelToolCalls?: unknown;
  /** Aborted when the client goes away: stop work. */
  signal: AbortSignal;
}

export interface ModelResult {
  text: string;
  finishReason?: string;
  toolCalls?: unknown[];
}

export interface ModelBackend {
  complete(req: ModelRequest): Promise<ModelResult>;
}

/** The built-in model: answers from the frames' pixels. */
/**
 * What analyzer models of one emulator share: per-frame measurements (overlapping windows, and a
 * fallback from one analyzer model to another, decode each frame once; entries go with their
 * frames) and compiled response schemas (a fresh ajv per answer would cost tens of ms).
 */
export interface AnalyzerCaches {
  stats: WeakMap<Buffer, FrameStats | null>;
  validators: JsonSchemaValidators;
}

export const newAnalyzerCaches = (): AnalyzerCaches => ({ stats: new WeakMap(), validators: new JsonSchemaValidators({ lenient: true }) });

export class AnalyzerBackend implements ModelBackend {
  constructor(
    private readonly variant: 'full' | 'mini',
    private readonly charsPerToken = 4,
    private readonly caches: AnalyzerCaches = newAnalyzerCaches(),
  ) {}

  async complete(req: ModelRequest): Promise<ModelResult> {
    const { text } = await analyze(
      {
        prompt: req.prompt,
        contexts: req.contexts.map((c) => ({ streamId: c.streamId, kind: c.kind, frames: c.frames })),
        variant: this.variant,
        ...(req.maxOutputTokens !== undefined ? { maxChars: req.maxOutputTokens * this.charsPerToken } : {}),
        ...(req.responseFormat
          ? {
              responseFormat:
                req.responseFormat.type === 'json_schema'
                  ? { type: 'json_schema' as const, schema: req.responseFormat.schema }
                  : { type: 'json_object' as const },
            }
          : {}),
      },
      { cache: this.caches.stats, validators: this.caches.validators },
    );
    return { text, finishReason: 'stop' };
  }
}

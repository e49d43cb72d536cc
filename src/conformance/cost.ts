/**
 * What a run costs: the kit's fixed plan (clip length, frame rate, token cap) and the estimate it
 * prints before it creates anything, on the model's pricing and the gateway's cost arithmetic.
 */
import { costMicrocents } from '../lib/wire';
import type { ModelPricing } from '../upstream/client';

/** Completions the kit may issue in one run, error probes included. */
export const MAX_COMPLETIONS = 10;
/** The clip the kit asks about, as a clip-mode legacy stream does (`start_offset_ms=-<ms>&max_fps=<fps>`). */
export const CLIP_MS = 2000;
export const CLIP_FPS = 2;
/** Output-token cap of each completion the kit issues. */
export const OUTPUT_CAP = 32;
/** The contract's default per-frame token budget: the estimate's assumption. */
export const TOKENS_PER_FRAME = 256;
/** Text tokens a kit prompt takes at most (its prompts are one short sentence). */
export const TEXT_TOKENS = 64;

export interface CostEstimate {
  model: string;
  pricing: Pick<ModelPricing, 'input_microcents_per_token' | 'output_microcents_per_token' | 'cached_input_microcents_per_token'>;
  /** Completions that reach the model (billed). */
  billed: number;
  /** Completions that must be refused before inference (error probes). */
  refused: number;
  inputTokens: number;
  outputTokens: number;
  microcents: number;
}

/** What the run will cost at most, on the model's pricing (tokens per frame assumed). */
export function estimateCost(model: string, pricing: CostEstimate['pricing']): CostEstimate {
  const clipFrames = (CLIP_MS / 1000) * CLIP_FPS + 1;
  // Billed: the clip, the frame and the streamed frame completion.
  const billed = 3;
  const inputTokens = billed * TEXT_TOKENS + (clipFrames + 2) * TOKENS_PER_FRAME;
  const outputTokens = billed * OUTPUT_CAP;
  return {
    model,
    pricing,
    billed,
    // Future frame, repeated query key, unknown stream, deleted stream.
    refused: 4,
    inputTokens,
    outputTokens,
    microcents: costMicrocents(pricing, { prompt_tokens: inputTokens, completion_tokens: outputTokens }),
  };
}

export function formatCents(microcents: number | undefined): string {
  if (typeof microcents !== 'number') return 'unknown';
  return `${(microcents / 1_000_000).toFixed(4)} ¢ (${microcents} µ¢)`;
}

export function costLine(e: CostEstimate): string {
  return (
    `cost: at most about ${formatCents(e.microcents)} on ${e.model}: ${e.billed} answered completions ` +
    `(≤ ${e.inputTokens} input tokens at ${e.pricing.input_microcents_per_token} µ¢, ≤ ${e.outputTokens} output tokens at ` +
    `${e.pricing.output_microcents_per_token} µ¢; ${TOKENS_PER_FRAME} tokens per frame assumed) and ${e.refused} refused before inference; one stream`
  );
}

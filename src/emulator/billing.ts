/**
 * `/billing`: the prepaid balance (authenticated) and the public pricing endpoints, plus the one
 * cost formula completions bill with.
 */
import express from 'express';
import type { Router } from 'express';
import { detailError } from '../lib/errors';
import type { EmulatorContext } from './context';
import { accountOf, requireAccount } from './http';
import type { ModelPricing } from '../lib/wire';

export interface TokenUsage {
  prompt_tokens: number;
  completion_tokens: number;
}

/**
 * Cost in microcents: uncached input at the input price, cached input at the cached price,
 * output at the output price. Integer in, integer out.
 */
export function costMicrocents(
  pricing: Pick<ModelPricing, 'input_microcents_per_token' | 'output_microcents_per_token' | 'cached_input_microcents_per_token'>,
  usage: TokenUsage,
  cachedTokens = 0,
): number {
  const cached = Math.min(Math.max(0, cachedTokens), usage.prompt_tokens);
  return (
    (usage.prompt_tokens - cached) * pricing.input_microcents_per_token +
    cached * pricing.cached_input_microcents_per_token +
    usage.completion_tokens * pricing.output_microcents_per_token
  );
}

export function billingRouter(ctx: EmulatorContext): Router {
  const r = express.Router();

  r.get('/accounts/me/balance', requireAccount(ctx), (_req, res) => {
    res.json(ctx.accounts.balance(accountOf(res).id));
  });

  r.get('/pricing', (_req, res) => {
    res.json(ctx.models.allPricing());
  });

  // Model ids hold a slash (`provider/model-name`): the rest of the path is the id.
  r.get('/pricing/*model', (req, res) => {
    const raw = (req.params as { model?: string | string[] }).model;
    const id = Array.isArray(raw) ? raw.join('/') : (raw ?? '');
    const pricing = ctx.models.pricing(id);
    if (!pricing) throw detailError(404, 'model_not_found', `No pricing for model ${JSON.stringify(id)}`);
    res.json(pricing);
  });

  return r;
}

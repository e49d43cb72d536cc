/**
 * `/billing`: the prepaid balance (authenticated), checkout (./checkout.ts) and the public pricing
 * endpoints, plus the one cost formula completions bill with.
 */
import express from 'express';
import type { Router } from 'express';
import { detailError } from '../lib/errors';
import { checkoutRouter } from './checkout';
import type { EmulatorContext } from './context';
import { accountOf, requireAccount } from './http';

export { costMicrocents } from '../lib/wire';
export type { TokenUsage } from '../lib/wire';

export function billingRouter(ctx: EmulatorContext): Router {
  const r = express.Router();

  r.get('/accounts/me/balance', requireAccount(ctx), (_req, res) => {
    res.json(ctx.accounts.balance(accountOf(res).id));
  });

  r.use(checkoutRouter(ctx));

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

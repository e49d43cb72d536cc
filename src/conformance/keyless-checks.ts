/** The checks that need no key and cost nothing: the model list and pricing, and the key's prefix. */
import { isRecord } from '../lib/is-record';
import { MAX_COMPLETIONS, costLine, estimateCost } from './cost';
import type { RunContext } from './run-context';
import { describe, problem, shapeProblems } from './shapes';
import type { Spec } from './shapes';

/** Model list and pricing: no key, no cost. Ends with the cost estimate. */
export async function keylessChecks(run: RunContext): Promise<void> {
  await run.check('key.prefix', async () => ({
    problems: problem(
      run.key.startsWith(run.brand.keyPrefix),
      `the key does not start with ${JSON.stringify(run.brand.keyPrefix)}: ` +
        'the gateway refuses such keys on /v0.2 (check the brand configuration)',
    ),
    detail: `${run.brand.keyPrefix}…`,
  }));
  await run.check('models.list', () => models(run));
  run.model ??= run.opts.model;
  await run.check('pricing.list', () => pricingList(run));
  const model = run.model;
  if (model === undefined) run.record('pricing.model', 'skip', 'no model to price');
  else await run.check('pricing.model', () => pricingModel(run, model));
  if (run.model !== undefined && run.price) {
    run.estimate = estimateCost(run.model, run.price);
    run.progress(costLine(run.estimate));
  } else run.progress(`cost: unknown (no priced model); one stream and at most ${MAX_COMPLETIONS} completions`);
}

const PRICING_SHAPE: Spec = {
  model: 'string',
  input_microcents_per_token: 'int',
  output_microcents_per_token: 'int',
  cached_input_microcents_per_token: 'int',
};

async function pricingList(run: RunContext): Promise<{ problems: string[]; detail: string }> {
  const all = await run.client.allPricing(run.call);
  const problems = all.flatMap((p, i) => shapeProblems(p, PRICING_SHAPE, `[${i}].`)).slice(0, 3);
  const listed = run.model !== undefined && all.some((p) => isRecord(p) && p.model === run.model);
  const among = run.model === undefined ? '' : listed ? `, ${run.model} among them` : `, ${run.model} not among them (not public?)`;
  return { problems, detail: `${all.length} pricing objects${among}` };
}

/** The model's pricing, kept for the cost estimate and the money spent when its shape is right. */
async function pricingModel(run: RunContext, model: string): Promise<{ problems: string[]; detail: string }> {
  const p = await run.client.pricing(model, run.call);
  const problems = [
    ...shapeProblems(p, PRICING_SHAPE),
    ...problem(p.model === model, `model should be ${JSON.stringify(model)}, got ${describe(p.model)}`),
  ];
  if (problems.length === 0) run.price = p;
  return {
    problems,
    detail:
      `input ${p.input_microcents_per_token}, cached input ${p.cached_input_microcents_per_token}, ` +
      `output ${p.output_microcents_per_token} µ¢/token`,
  };
}

async function models(run: RunContext): Promise<{ problems: string[]; detail: string }> {
  const list = await run.client.listModels(run.call);
  const problems = [...problem(list.object === 'list', `object should be "list", got ${describe(list.object)}`)];
  const known = ['ready', 'unavailable', 'loading'];
  const odd = new Set<string>();
  list.data.forEach((m, i) => {
    problems.push(...shapeProblems(m, { id: 'string', status: 'string' }, `data[${i}].`));
    if (isRecord(m) && typeof m.status === 'string' && !known.includes(m.status)) odd.add(m.status);
  });
  const ready = list.data.filter((m) => isRecord(m) && m.status === 'ready').map((m) => m.id);
  const wanted = run.opts.model;
  if (wanted !== undefined) {
    const entry = list.data.find((m) => isRecord(m) && m.id === wanted);
    problems.push(...problem(entry !== undefined, `model ${wanted} is not listed`));
    if (entry) problems.push(...problem(entry.status === 'ready', `model ${wanted} is ${describe(entry.status)}, not ready`));
    run.model = wanted;
  } else {
    problems.push(...problem(ready.length > 0, 'no model is ready'));
    run.model = ready[0];
  }
  const extra = odd.size ? `; statuses the gateway shows as unavailable: ${[...odd].join(', ')}` : '';
  return {
    problems: problems.slice(0, 4),
    detail: `${list.data.length} models, ${ready.length} ready; using ${run.model ?? 'none'}${extra}`,
  };
}

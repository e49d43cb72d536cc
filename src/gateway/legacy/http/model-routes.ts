/** `GET /models` and `POST /chat/completions/clip` (reinfer): the routes that name no stream. */
import type { Router } from 'express';
import { bearerKey } from '../../../lib/bearer';
import { toLegacyModels } from '../contract/responses';
import { reinferHandler } from './reinfer';
import { upstreamIds } from './route-context';
import type { RouteContext } from './route-context';

export function modelRoutes(r: Router, ctx: RouteContext): void {
  const { brand, streams, catalog, store, upstream } = ctx.deps;
  const { caller } = ctx;

  r.get('/models', async (req, res) => {
    // No key needed here; clients send theirs anyway: count it for telemetry, never blocking the answer.
    if (ctx.deps.onRequest && bearerKey(req)) void caller(req, res).catch(() => undefined);
    const list = await catalog.modelList();
    res.json(toLegacyModels(list, catalog.observed()));
  });

  const mapUpstreamError = streams.mapUpstreamError.bind(streams);
  const reinfer = { brand, store, upstream, catalog, schemas: ctx.schemas, validators: streams.schemas, mapUpstreamError };
  r.post('/chat/completions/clip', reinferHandler(reinfer, caller, upstreamIds));
}

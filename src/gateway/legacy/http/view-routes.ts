/** `GET /streams/{id}/info` and `POST /streams/{id}/spectate`: the stream views, on any replica. */
import type { Router } from 'express';
import { upstreamIds } from './route-context';
import type { RouteContext } from './route-context';
import { spectate, streamInfo } from './stream-views';
import type { StreamViewDeps } from './stream-views';

export function viewRoutes(r: Router, ctx: RouteContext): void {
  const { streams } = ctx.deps;
  const { caller, streamId } = ctx;
  const views: StreamViewDeps = {
    brand: ctx.deps.brand,
    upstream: ctx.deps.upstream,
    clock: ctx.clock,
    mapUpstreamError: (err, c) => streams.mapUpstreamError(err, c),
  };

  r.get('/streams/:id/info', async (req, res) => {
    const id = streamId(req);
    const who = await caller(req, res);
    const rec = await streams.recordFor(id, who.accountId);
    res.json(await streamInfo(views, rec, who.apiKey, upstreamIds(req, res)));
  });

  r.post('/streams/:id/spectate', async (req, res) => {
    const id = streamId(req);
    const who = await caller(req, res);
    const rec = await streams.recordFor(id, who.accountId);
    res.json(await spectate(views, rec, who.apiKey, upstreamIds(req, res)));
  });
}

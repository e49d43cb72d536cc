/**
 * The `/v0.2` router: each group of routes registers itself on it (streams, their views, feedback,
 * models and reinfer), sharing one `RouteContext`; anything else is the legacy 404.
 */
import express from 'express';
import type { Router } from 'express';
import { legacyError } from '../contract/validate';
import { feedbackRoutes } from './feedback-routes';
import { modelRoutes } from './model-routes';
import { routeContext } from './route-context';
import type { LegacyRouteDeps } from './route-context';
import { streamRoutes } from './stream-routes';
import { viewRoutes } from './view-routes';

export { upstreamIds } from './route-context';
export type { LegacyRouteDeps } from './route-context';

/** The `/v0.2` interface, served on /v1beta through LegacyStreams. */
export function legacyRouter(deps: LegacyRouteDeps): Router {
  const ctx = routeContext(deps);
  const r = express.Router();
  // Feedback first: `/streams/feedback` must never be taken for a stream id.
  feedbackRoutes(r, ctx);
  streamRoutes(r, ctx);
  viewRoutes(r, ctx);
  modelRoutes(r, ctx);
  r.use((req) => {
    throw legacyError(404, 'not_found', `No route for ${req.method} /v0.2${req.path}`);
  });
  return r;
}

/** Feedback on streams: `GET /streams/feedback` (the account's, paged) and `POST /streams/{id}/feedback`. */
import { randomUUID } from 'node:crypto';
import type { Request, Router } from 'express';
import type { LegacyConfig } from '../../../config';
import { LEGACY_ERRORS } from '../contract/errors';
import { toLegacyFeedback } from '../contract/responses';
import { legacyError, legacyValidationError, parseLegacy } from '../contract/validate';
import type { RouteContext } from './route-context';

const PAGE_CURSOR = /^\d{1,16}$/;

/** `?limit=` (default pageSize, at most maxPageSize) and `?cursor=` of the feedback list; bad values → 422. */
function feedbackPage(req: Request, cfg: LegacyConfig['feedback']): { limit: number; after: string | null } {
  const { limit, cursor } = req.query;
  let n = cfg.pageSize;
  if (limit !== undefined) {
    n = typeof limit === 'string' && /^\d{1,7}$/.test(limit) ? Number(limit) : NaN;
    if (!(n >= 1 && n <= cfg.maxPageSize)) throw pageError('limit', `limit must be an integer from 1 to ${cfg.maxPageSize}`);
  }
  if (cursor !== undefined && !(typeof cursor === 'string' && PAGE_CURSOR.test(cursor)))
    throw pageError('cursor', 'cursor is not one this endpoint returned');
  return { limit: n, after: typeof cursor === 'string' ? cursor : null };
}

function pageError(param: string, msg: string) {
  return legacyValidationError([{ loc: ['query', param], msg, type: 'value_error' }], null, msg);
}

/** Registered before the stream routes, so `feedback` is never taken for a stream id. */
export function feedbackRoutes(r: Router, ctx: RouteContext): void {
  const { streams, store, cfg } = ctx.deps;
  const { caller, streamId, schemas, clock } = ctx;

  // The body stays the bare array legacy clients read; `?limit=&cursor=` page it, and the next page's
  // cursor comes in `Link: <…>; rel="next"` (RFC 8288) and `X-Next-Cursor`.
  r.get('/streams/feedback', async (req, res) => {
    const who = await caller(req, res);
    const want = feedbackPage(req, cfg.feedback);
    const page = await store.feedbackOf(who.accountId, want);
    if (page.next !== null) {
      res.set('X-Next-Cursor', page.next);
      res.append('Link', `<${req.baseUrl}/streams/feedback?limit=${want.limit}&cursor=${page.next}>; rel="next"`);
    }
    res.json(
      page.items.map((f) =>
        toLegacyFeedback({
          id: f.id,
          streamId: f.stream_id,
          rating: f.rating,
          category: f.category,
          feedback: f.feedback,
          createdAtMs: Date.parse(f.created_at),
          updatedAtMs: Date.parse(f.updated_at),
        }),
      ),
    );
  });

  r.post('/streams/:id/feedback', async (req, res) => {
    const id = streamId(req);
    const who = await caller(req, res);
    const body = parseLegacy(schemas.feedback, req.body ?? {}, res.locals.requestId as string);
    const rec = await streams.recordFor(id, who.accountId);
    if (rec.state === 'ended') throw LEGACY_ERRORS.streamEnded(id);
    const now = new Date(clock.now()).toISOString();
    const added = await store.addFeedback(
      { id: randomUUID(), stream_id: id, accountId: who.accountId, ...body, created_at: now, updated_at: now },
      cfg.feedback,
    );
    if (added !== 'ok') {
      const [scope, limit] = added === 'stream_full' ? ['stream', cfg.feedback.perStream] : ['account', cfg.feedback.perAccount];
      const msg = `Feedback limit reached: at most ${limit} entries per ${scope}`;
      throw legacyError(422, 'feedback_limit_reached', msg, [{ loc: ['body'], msg, type: 'value_error' }]);
    }
    res.json({ status: 'ok' });
  });
}

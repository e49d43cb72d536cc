import { randomUUID } from 'node:crypto';
import express from 'express';
import type { Request, Response, Router } from 'express';
import type { Brand } from '../../../brand';
import type { LegacyConfig } from '../../../config';
import type { ClientAddress } from '../../../lib/client-address';
import { keyHash } from '../../../lib/keys';
import { newTraceId, requestTraceId } from '../../../lib/spans';
import { realClock } from '../../../lib/timers';
import type { Clock } from '../../../lib/timers';
import type { UpstreamClient } from '../../../upstream/client';
import type { Feedback, SessionRecords } from '../../store/store';
import type { ResultWindows } from '../../store/result-windows';
import { bearerKey } from '../../../lib/bearer';
import { checkKey, isStreamId } from './access';
import type { FailedAuthLimiter } from './auth-failures';
import { LEGACY_ERRORS } from '../contract/errors';
import type { UpstreamCatalog } from '../sessions/catalog';
import { reinferHandler } from './reinfer';
import { createLegacySchemas } from '../contract/schema';
import type { LegacySessions } from '../sessions/sessions';
import {
  legacyStreamState,
  toLegacyCreateResponse,
  toLegacyFeedback,
  toLegacyKeepalive,
  toLegacyModels,
  toLegacyPromptResponse,
} from '../contract/responses';
import { normalizeCreate } from '../contract/spec';
import { spectate, streamInfo } from './stream-views';
import type { StreamViewDeps } from './stream-views';
import { legacyError, legacyValidationError, parseLegacy } from '../contract/validate';

export interface LegacyRouteDeps {
  cfg: LegacyConfig;
  brand: Brand;
  store: Feedback & ResultWindows & Pick<SessionRecords, 'getSession' | 'addCost'>;
  sessions: LegacySessions;
  catalog: UpstreamCatalog;
  /** Per-client-address budget of failed authentications (absent: unlimited). */
  authLimiter?: FailedAuthLimiter;
  /** The request's client address (`server.trustProxy`), what the budget counts by. */
  clientAddress: ClientAddress;
  /** Counts one legacy request by endpoint (deprecation telemetry), e.g. `POST /v0.2/streams/:id/keepalive`. */
  onRequest?(keyHash: string | undefined, endpoint: string, accountId?: string, userAgent?: string): void;
  /** Sunset policy of creates: throws the legacy-shaped refusal during a brownout or after the sunset. */
  admitCreate?(keyHash: string): void;
  /**
   * Time of the routes: what the keepalive's `state` compares the upstream's last frame with, and
   * feedback's timestamps (default the real clock: the upstream's timestamps are on real time).
   */
  clock?: Pick<Clock, 'now'>;
  /** The upstream reinfer calls with the caller's key. */
  upstream: UpstreamClient;
}

interface Caller {
  apiKey: string;
  accountId: string;
}

/**
 * Request id and trace id the upstream calls made for this request carry (x-request-id,
 * traceparent): the request's trace (its span's with tracing on, else the caller's `traceparent`'s),
 * else a new one, which its access line then shows too.
 */
export function upstreamIds(req: Request, res: Response): { requestId: string; traceId: string } {
  const locals = res.locals as { requestId?: string; traceId?: string };
  locals.traceId ??= requestTraceId(req.headers.traceparent) ?? newTraceId();
  return { requestId: locals.requestId ?? '', traceId: locals.traceId };
}

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

/** The `/v0.2` interface, served on /v1beta through LegacySessions. */
export function legacyRouter(deps: LegacyRouteDeps): Router {
  const { brand, sessions, catalog, store, cfg } = deps;
  const clock = deps.clock ?? realClock;
  const schemas = createLegacySchemas(brand);
  const r = express.Router();

  /** The bearer key's caller (`checkKey`): 401 when refused, 503 + retry-after over the failed-auth budget; counted. */
  async function caller(req: Request, res: Response): Promise<Caller> {
    const key = await checkKey(deps, deps.clientAddress(req), bearerKey(req), () => upstreamIds(req, res));
    if (!key.ok) throw 'blockedMs' in key ? deps.authLimiter!.refusal(key.blockedMs) : LEGACY_ERRORS.unauthorized(key.refused);
    const who = { apiKey: key.apiKey, accountId: key.accountId };
    deps.onRequest?.(keyHash(who.apiKey), endpointOf(req), who.accountId, req.get('user-agent'));
    return who;
  }

  const endpointOf = (req: Request) => `${req.method} ${req.baseUrl}${(req.route as { path?: string } | undefined)?.path ?? req.path}`;

  function streamId(req: Request): string {
    const id = req.params.id;
    if (!isStreamId(id)) throw LEGACY_ERRORS.noSuchStreamId();
    return id;
  }

  r.post('/streams', async (req: Request, res: Response) => {
    const fallbackId = res.locals.requestId as string;
    const who = await caller(req, res);
    deps.admitCreate?.(keyHash(who.apiKey));
    const parsed = parseLegacy(schemas.createStream, req.body ?? {}, fallbackId);
    const spec = normalizeCreate(parsed, { maxTokensPerSecond: cfg.maxTokensPerSecond }, fallbackId);
    res.locals.legacyRequestId = spec.requestId;
    await catalog.requireReadyModel(spec.model);
    // A client that gives up before the upstream answers must not leave an upstream stream behind.
    const gaveUp = new AbortController();
    res.once('close', () => {
      if (!res.writableFinished) gaveUp.abort();
    });
    const out = await sessions.create({
      apiKey: who.apiKey,
      accountId: who.accountId,
      spec,
      signal: gaveUp.signal,
      ...upstreamIds(req, res),
    });
    res.status(201).json(toLegacyCreateResponse({ streamId: out.streamId, ttlSeconds: out.ttlSeconds, media: out.media }, brand));
  });

  r.get('/models', async (req, res) => {
    // No key needed here; clients send theirs anyway: count it for telemetry, never blocking the answer.
    if (deps.onRequest && bearerKey(req)) void caller(req, res).catch(() => undefined);
    const list = await catalog.modelList();
    res.json(toLegacyModels(list, catalog.observed()));
  });

  // Before /streams/:id so `feedback` is never taken for a stream id.
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

  r.post('/streams/:id/keepalive', async (req, res) => {
    const id = streamId(req);
    const who = await caller(req, res);
    const ka = await sessions.keepalive(id, who.apiKey, who.accountId, upstreamIds(req, res));
    res.json(
      toLegacyKeepalive(
        {
          streamId: ka.streamId,
          ttlSeconds: ka.ttlSeconds,
          creditsRemainingCents: ka.creditsRemainingCents,
          costCents: ka.costCents,
          secondsCharged: ka.secondsCharged,
          state: legacyStreamState({ last_frame_at_ms: ka.lastFrameAtMs }, clock.now()),
          roomToken: ka.roomToken,
        },
        brand,
      ),
    );
  });

  r.delete('/streams/:id', async (req, res) => {
    const id = streamId(req);
    const who = await caller(req, res);
    const rec = await sessions.recordFor(id, who.accountId);
    if (rec.state === 'ended') {
      res.status(204).end();
      return;
    }
    // Any replica: the store picks one winner, which closes every socket and deletes upstream with this key.
    await sessions.end(id, sessions.reasons.clientRequested, { apiKey: who.apiKey, answerFirst: true });
    res.json({ status: 'ok' });
  });

  const views: StreamViewDeps = {
    brand,
    upstream: deps.upstream,
    clock,
    mapUpstreamError: (err, ctx) => sessions.mapUpstreamError(err, ctx),
  };

  r.get('/streams/:id/info', async (req, res) => {
    const id = streamId(req);
    const who = await caller(req, res);
    const rec = await sessions.recordFor(id, who.accountId);
    res.json(await streamInfo(views, rec, who.apiKey, upstreamIds(req, res)));
  });

  r.post('/streams/:id/spectate', async (req, res) => {
    const id = streamId(req);
    const who = await caller(req, res);
    const rec = await sessions.recordFor(id, who.accountId);
    res.json(await spectate(views, rec, who.apiKey, upstreamIds(req, res)));
  });

  r.patch('/streams/:id/config/prompt', async (req, res) => {
    const id = streamId(req);
    const who = await caller(req, res);
    const { prompt } = parseLegacy(schemas.promptPatch, req.body ?? {}, res.locals.requestId as string);
    const rec = await sessions.updatePrompt(id, who.accountId, prompt);
    res.json(
      toLegacyPromptResponse({
        id: rec.streamId,
        streamId: rec.streamId,
        prompt: rec.prompt,
        spec: rec.spec,
        createdAtMs: rec.createdAtMs,
        updatedAtMs: rec.promptUpdatedAtMs,
      }),
    );
  });

  r.post('/streams/:id/feedback', async (req, res) => {
    const id = streamId(req);
    const who = await caller(req, res);
    const body = parseLegacy(schemas.feedback, req.body ?? {}, res.locals.requestId as string);
    const rec = await sessions.recordFor(id, who.accountId);
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

  const mapUpstreamError = sessions.mapUpstreamError.bind(sessions);
  const reinfer = { brand, store, upstream: deps.upstream, catalog, schemas, validators: sessions.schemas, mapUpstreamError };
  r.post('/chat/completions/clip', reinferHandler(reinfer, caller, upstreamIds));

  r.use((req) => {
    throw legacyError(404, 'not_found', `No route for ${req.method} /v0.2${req.path}`);
  });

  return r;
}

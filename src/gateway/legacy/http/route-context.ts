/**
 * What every `/v0.2` route group shares: the router's dependencies, the request schemas, the
 * clock, and how a request's caller (its key, checked and counted) and stream id are read.
 */
import type { Request, Response } from 'express';
import type { Brand } from '../../../brand';
import type { LegacyConfig } from '../../../config';
import type { ClientAddress } from '../../../lib/client-address';
import { bearerKey } from '../../../lib/bearer';
import { keyHash } from '../../../lib/keys';
import { newTraceId, requestTraceId } from '../../../lib/spans';
import { realClock } from '../../../lib/timers';
import type { Clock } from '../../../lib/timers';
import type { UpstreamClient } from '../../../upstream/client';
import type { Feedback, StreamRecords } from '../../store/store';
import type { ResultWindows } from '../../store/result-windows';
import { LEGACY_ERRORS } from '../contract/errors';
import { createLegacySchemas } from '../contract/schema';
import type { LegacySchemas } from '../contract/schema';
import type { UpstreamCatalog } from '../streams/catalog';
import type { LegacyStreams } from '../streams/legacy-streams';
import { checkKey, isStreamId } from './access';
import type { FailedAuthLimiter } from './auth-failures';

export interface LegacyRouteDeps {
  cfg: LegacyConfig;
  brand: Brand;
  store: Feedback & ResultWindows & Pick<StreamRecords, 'getRecord' | 'addCost'>;
  streams: LegacyStreams;
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

export interface Caller {
  apiKey: string;
  accountId: string;
}

export interface RouteContext {
  readonly deps: LegacyRouteDeps;
  readonly schemas: LegacySchemas;
  readonly clock: Pick<Clock, 'now'>;
  /** The bearer key's caller (`checkKey`): 401 when refused, 503 + retry-after over the failed-auth budget; counted. */
  caller(req: Request, res: Response): Promise<Caller>;
  /** The `:id` parameter when it is a stream id, else the legacy 404. */
  streamId(req: Request): string;
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

/** The endpoint a request is counted under: its route's pattern, not its path (`/streams/:id/info`). */
const endpointOf = (req: Request) => `${req.method} ${req.baseUrl}${(req.route as { path?: string } | undefined)?.path ?? req.path}`;

export function routeContext(deps: LegacyRouteDeps): RouteContext {
  return {
    deps,
    schemas: createLegacySchemas(deps.brand),
    clock: deps.clock ?? realClock,
    async caller(req, res) {
      const key = await checkKey(deps, deps.clientAddress(req), bearerKey(req), () => upstreamIds(req, res));
      if (!key.ok) throw 'blockedMs' in key ? deps.authLimiter!.refusal(key.blockedMs) : LEGACY_ERRORS.unauthorized(key.refused);
      const who = { apiKey: key.apiKey, accountId: key.accountId };
      deps.onRequest?.(keyHash(who.apiKey), endpointOf(req), who.accountId, req.get('user-agent'));
      return who;
    },
    streamId(req) {
      const id = req.params.id;
      if (!isStreamId(id)) throw LEGACY_ERRORS.noSuchStreamId();
      return id;
    },
  };
}

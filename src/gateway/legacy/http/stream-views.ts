/**
 * The two read-only views of a live legacy stream that the provider's v0.2 documents:
 * `GET /v0.2/streams/{id}/info` (state, fps, resolution, inference figures) and
 * `POST /v0.2/streams/{id}/spectate` (a subscribe-only token for the upstream's media room). Both
 * answer on any replica: they read the store's record and ask the upstream with the caller's key.
 */
import type { Brand } from '../../../brand';
import type { Clock } from '../../../lib/timers';
import type { Stream, UpstreamClient } from '../../../upstream/client';
import { isUpstreamStatus } from '../../../upstream/client';
import { LEGACY_ERRORS } from '../contract/errors';
import { legacyStreamState, toLegacySpectate, toLegacyStreamInfo } from '../contract/responses';
import type { LegacySpectate, LegacyStreamInfo } from '../contract/responses';
import type { LegacyRecord } from '../streams/ports';
import { UPSTREAM_CONTEXTS } from '../contract/upstream-errors';
import type { UpstreamCallContext } from '../contract/upstream-errors';
import { legacyError } from '../contract/validate';

export interface StreamViewDeps {
  brand: Brand;
  upstream: UpstreamClient;
  clock: Pick<Clock, 'now'>;
  /** Upstream failures → legacy errors (counted), as every legacy path maps them. */
  mapUpstreamError(err: unknown, ctx: UpstreamCallContext): Error;
}

type Ids = { requestId?: string; traceId?: string };

/** An ended stream has no live view: 404, as the provider answers. */
function requireLive(rec: LegacyRecord): void {
  if (rec.state === 'ended') throw LEGACY_ERRORS.streamEnded(rec.streamId, rec.endReason ?? 'ended');
}

/** An upstream call about the stream: its 404 (gone there) is the stream's end, the rest maps as usual. */
async function askUpstream<T>(deps: StreamViewDeps, rec: LegacyRecord, ctx: UpstreamCallContext, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (err) {
    if (isUpstreamStatus(err, 404)) throw LEGACY_ERRORS.streamEndedUpstream(rec.streamId);
    throw deps.mapUpstreamError(err, ctx);
  }
}

export async function streamInfo(deps: StreamViewDeps, rec: LegacyRecord, apiKey: string, ids: Ids): Promise<LegacyStreamInfo> {
  requireLive(rec);
  const up: Stream = await askUpstream(deps, rec, UPSTREAM_CONTEXTS.info, () => deps.upstream.getStream(apiKey, rec.streamId, ids));
  if (up.state === 'ended') throw LEGACY_ERRORS.streamEndedUpstream(rec.streamId);
  const now = deps.clock.now();
  return toLegacyStreamInfo(
    {
      streamId: rec.streamId,
      transport: rec.spec.transport,
      state: legacyStreamState(up, now),
      uptimeMs: now - rec.createdAtMs,
      fps: up.recent_fps,
      width: rec.frameWidth ?? 0,
      height: rec.frameHeight ?? 0,
      inferencesCompleted: rec.inferencesCompleted ?? 0,
      inferencesFailed: rec.inferencesFailed ?? 0,
      lastInferenceMs: rec.lastInferenceMs ?? 0,
    },
    deps.brand,
  );
}

export async function spectate(deps: StreamViewDeps, rec: LegacyRecord, apiKey: string, ids: Ids): Promise<LegacySpectate> {
  requireLive(rec);
  if (rec.spec.transport !== 'native') {
    throw legacyError(
      400,
      'not_native_stream',
      `Stream ${rec.streamId} does not use native transport: only native streams can be spectated`,
    );
  }
  const token = await askUpstream(deps, rec, UPSTREAM_CONTEXTS.spectate, () => deps.upstream.viewerToken(apiKey, rec.streamId, ids));
  return toLegacySpectate({ url: token.view.url, token: token.view.token }, deps.brand);
}

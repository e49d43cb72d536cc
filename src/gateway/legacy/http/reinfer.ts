/**
 * `POST /v0.2/chat/completions/clip` ("reinfer"): one chat completion, with the caller's key and a
 * new prompt, on the frames behind a result the stream already delivered (spec/legacy-clients.md).
 *
 * Any replica serves it: the result's window on the stream clock is in the store under the result
 * id (./result-window.ts writes it after the result's commit). Only the stream's account finds it;
 * anyone else gets the 404 of an unknown id. A result whose frames are gone (its stream ended, or
 * its window aged out of the upstream's frame buffer) gets a 410 saying which: legacy clients retry
 * a 404 (the window of a just-delivered result may not be written yet), never a 410.
 */
import { randomUUID } from 'node:crypto';
import type { Request, Response } from 'express';
import type { Brand } from '../../../brand';
import type { JsonSchemaValidators } from '../../../lib/json-schema';
import type { Stream } from '../../../lib/wire';
import type { UpstreamClient } from '../../../upstream/client';
import { isUpstreamCode, isUpstreamStatus } from '../../../upstream/client';
import type { ResultWindow, ResultWindows } from '../../store/result-windows';
import { StoreUnavailableError } from '../../store/store';
import type { StreamRecords } from '../../store/store';
import type { UpstreamCatalog } from '../streams/catalog';
import { LEGACY_ERRORS } from '../contract/errors';
import { compileOutputSchema } from '../contract/output-schema';
import type { LegacySchemas } from '../contract/schema';
import { legacyRecord } from '../streams/ownership';
import { buildReinferRequest } from '../contract/upstream-request';
import { toLegacyReinfer } from '../contract/responses';
import { UPSTREAM_CONTEXTS } from '../contract/upstream-errors';
import type { UpstreamCallContext } from '../contract/upstream-errors';
import { parseLegacy } from '../contract/validate';

export interface ReinferDeps {
  brand: Brand;
  store: ResultWindows & Pick<StreamRecords, 'getRecord' | 'addCost'>;
  upstream: UpstreamClient;
  catalog: UpstreamCatalog;
  schemas: Pick<LegacySchemas, 'reinfer'>;
  /** Compiles the caller's output schema (the streams' shared, content-cached validators). */
  validators: JsonSchemaValidators;
  /** Upstream failures → legacy errors, counted as every legacy path counts them (`LegacyStreams.mapUpstreamError`). */
  mapUpstreamError(err: unknown, ctx: UpstreamCallContext): Error;
}

/** The authenticated caller, as the legacy router establishes it (and counts the request). */
export type ReinferCaller = (req: Request, res: Response) => Promise<{ apiKey: string; accountId: string }>;

/** Upstream request and trace ids of this request. */
export type UpstreamIdsOf = (req: Request, res: Response) => { requestId: string; traceId: string };

export function reinferHandler(deps: ReinferDeps, caller: ReinferCaller, idsOf: UpstreamIdsOf) {
  const { brand, store, upstream, catalog } = deps;
  return async (req: Request, res: Response): Promise<void> => {
    const who = await caller(req, res);
    const body = parseLegacy(deps.schemas.reinfer, req.body ?? {}, res.locals.requestId as string);
    const window = await store.getResultWindow(body.result_id);
    if (!window || window.accountId !== who.accountId) throw LEGACY_ERRORS.resultNotFound();
    // The record outlives the stream by the tombstone; past it the stream is long gone too.
    const rec = await store.getRecord(window.streamId);
    if (!rec || rec.state === 'ended') throw LEGACY_ERRORS.clipDropped(rec?.endReason ?? null);
    await catalog.requireReadyModel(body.model, ['body', 'model']);
    if (body.output_schema) compileOutputSchema(deps.validators, body.output_schema, ['body', 'output_schema']);

    const ids = idsOf(req, res);
    const stream = await upstream.getStream(who.apiKey, window.streamId, ids).catch((err: unknown) => {
      throw reinferError(err, deps);
    });
    framesStillThere(stream, window);

    const { spec } = legacyRecord(rec);
    const request = buildReinferRequest(window, brand, {
      prompt: body.prompt,
      model: body.model,
      maxTokens: body.max_tokens ?? spec.maxOutputTokens,
      temperature: body.temperature,
      outputSchema: body.output_schema,
    });
    const r = await upstream.chatCompletion(who.apiKey, request, ids).catch((err: unknown) => {
      throw reinferError(err, deps);
    });
    // The stream's next keepalive reports this cost with its ticks'. The answer is paid for upstream
    // already: a store outage (logged by the store) must not make the client pay for it twice.
    const cost = await catalog.completionCost(r.model, r.response, brand);
    if (cost > 0) await store.addCost(window.streamId, cost).catch(unlessStoreDown);
    res.json(toLegacyReinfer({ id: randomUUID(), completion: r.response, modelName: r.model }));
  };
}

/**
 * The upstream's view of the stream decides whether the window's frames are still there: an ended
 * stream dropped them; a window starting before the oldest retained frame (more than one frame
 * before it: the window's ends are good to a frame) lost its start to eviction. A video reference
 * would clamp silently into what is left, so this is checked before the completion.
 */
function framesStillThere(s: Stream, w: ResultWindow): void {
  if (s.state === 'ended') throw LEGACY_ERRORS.clipDropped(s.end_reason);
  if (s.first_frame_at_ms === null) return; // no frame yet: nothing to compare (the completion will say)
  if (s.first_available_frame_at_ms === null) throw LEGACY_ERRORS.clipEvicted();
  const oldestMs = s.first_available_frame_at_ms - s.first_frame_at_ms;
  const frameMs = s.recent_fps > 0 ? 1000 / s.recent_fps : 0;
  if (oldestMs > (w.mode === 'clip' ? w.startMs : w.endMs) + frameMs) throw LEGACY_ERRORS.clipEvicted();
}

function unlessStoreDown(err: unknown): false {
  if (err instanceof StoreUnavailableError) return false;
  throw err;
}

/** An upstream failure of reinfer: frames gone → 410; anything else as every legacy path maps it. */
function reinferError(err: unknown, deps: Pick<ReinferDeps, 'mapUpstreamError'>): Error {
  if (isUpstreamStatus(err, 404) && isUpstreamCode(err, 'stream_not_found')) return LEGACY_ERRORS.clipDropped(null);
  if (isUpstreamCode(err, 'frame_evicted')) return LEGACY_ERRORS.clipEvicted();
  return deps.mapUpstreamError(err, UPSTREAM_CONTEXTS.reinfer);
}

/** A legacy stream's own routes: create, keepalive, prompt and delete. */
import type { Request, Response, Router } from 'express';
import { keyHash } from '../../../lib/keys';
import { legacyStreamState, toLegacyCreateResponse, toLegacyKeepalive, toLegacyPromptResponse } from '../contract/responses';
import { normalizeCreate } from '../contract/spec';
import { parseLegacy } from '../contract/validate';
import { upstreamIds } from './route-context';
import type { RouteContext } from './route-context';

export function streamRoutes(r: Router, ctx: RouteContext): void {
  const { brand, streams, catalog, cfg } = ctx.deps;
  const { caller, streamId, schemas, clock } = ctx;

  r.post('/streams', async (req: Request, res: Response) => {
    const fallbackId = res.locals.requestId as string;
    const who = await caller(req, res);
    ctx.deps.admitCreate?.(keyHash(who.apiKey));
    const parsed = parseLegacy(schemas.createStream, req.body ?? {}, fallbackId);
    const spec = normalizeCreate(parsed, { maxTokensPerSecond: cfg.maxTokensPerSecond }, fallbackId);
    res.locals.legacyRequestId = spec.requestId;
    await catalog.requireReadyModel(spec.model);
    // A client that gives up before the upstream answers must not leave an upstream stream behind.
    const gaveUp = new AbortController();
    res.once('close', () => {
      if (!res.writableFinished) gaveUp.abort();
    });
    const out = await streams.create({
      apiKey: who.apiKey,
      accountId: who.accountId,
      spec,
      signal: gaveUp.signal,
      ...upstreamIds(req, res),
    });
    res.status(201).json(toLegacyCreateResponse({ streamId: out.streamId, ttlSeconds: out.ttlSeconds, media: out.media }, brand));
  });

  r.post('/streams/:id/keepalive', async (req, res) => {
    const id = streamId(req);
    const who = await caller(req, res);
    const ka = await streams.keepalive(id, who.apiKey, who.accountId, upstreamIds(req, res));
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
    const rec = await streams.recordFor(id, who.accountId);
    if (rec.state === 'ended') {
      res.status(204).end();
      return;
    }
    // Any replica: the store picks one winner, which closes every socket and deletes upstream with this key.
    await streams.end(id, streams.reasons.clientRequested, { apiKey: who.apiKey, answerFirst: true });
    res.json({ status: 'ok' });
  });

  r.patch('/streams/:id/config/prompt', async (req, res) => {
    const id = streamId(req);
    const who = await caller(req, res);
    const { prompt } = parseLegacy(schemas.promptPatch, req.body ?? {}, res.locals.requestId as string);
    const rec = await streams.updatePrompt(id, who.accountId, prompt);
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
}

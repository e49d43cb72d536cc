import { randomUUID } from 'node:crypto';
import express from 'express';
import type { Router } from 'express';
import { detailError, streamError } from '../lib/errors';
import type { Account } from './accounts';
import type { EmulatorContext } from './context';
import { checkCameraSource, parseCreateBody } from './camera-sources';
import { accountOf, requireAccount, uuidParam } from './http';
import type { EmulatedStream } from './streams';
import { mintPublishToken, mintSubscribeToken } from './room/tokens';

/** Lifetime of a viewer token (the provider's `expires_in_seconds`, "currently 300"). */
export const VIEWER_TOKEN_TTL_SECONDS = 300;

/** Publish token for a stream's room: room = stream id, one publisher identity per stream. */
function publishToken(ctx: EmulatorContext, stream: EmulatedStream): Promise<string> {
  return mintPublishToken(ctx.roomKeys, stream.id, `publisher-${stream.id}`, ctx.cfg.emulator.room.tokenTtlSeconds);
}

/**
 * A subscribe-only token for the stream's room, one identity per viewer. Only the owner's active
 * stream has one: another key's stream answers 404 like an unknown one (the provider's page),
 * and so does an ended stream (its room is gone); in the provider's dialect as `{detail}`.
 */
async function viewerToken(ctx: EmulatorContext, id: string, account: Account): Promise<string> {
  const stream = ctx.streams.get(id);
  const gone = (why: string) =>
    ctx.cfg.emulator.dialect === 'provider'
      ? detailError(404, 'stream_not_found', 'Stream not found')
      : streamError(404, 'stream_not_found', why);
  if (!stream || stream.accountId !== account.id) throw gone(`Stream ${id} not found`);
  if (stream.state !== 'active') throw gone(`Stream ${id} has ended`);
  return mintSubscribeToken(ctx.roomKeys, stream.id, `viewer-${randomUUID()}`, VIEWER_TOKEN_TTL_SECONDS);
}

/**
 * The stream of a lifecycle call. The contract answers a missing stream in the nested stream shape
 * and another account's with 403; the provider's reference answers both with 404
 * `{detail: "Stream not found"}` (its dialect, `emulator.dialect: provider`).
 */
function lifecycleStream(ctx: EmulatorContext, id: string | undefined, account: Account): EmulatedStream {
  const streamId = uuidParam(id);
  if (ctx.cfg.emulator.dialect !== 'provider') return ctx.streams.require(streamId, account);
  const s = ctx.streams.get(streamId);
  if (!s || s.accountId !== account.id) throw detailError(404, 'stream_not_found', 'Stream not found');
  return s;
}

/** POST/GET/DELETE /streams, POST /streams/{id}/keepalive and /viewer-token of the current interface. */
export function streamsRouter(ctx: EmulatorContext): Router {
  const r = express.Router();
  r.use('/streams', requireAccount(ctx));

  r.post('/streams', async (req, res) => {
    const account = accountOf(res);
    const source = parseCreateBody(req.body);
    // Creation requires credits (402 otherwise), like the provider.
    if (!ctx.accounts.canPay(account.id, 1)) {
      throw streamError(402, 'billing_denied', 'Insufficient credits to create a stream');
    }
    if (source) {
      await checkCameraSource(source, ctx.cfg.emulator.cameraSources, (why) =>
        ctx.logger.info({ type: source.type, why }, 'camera source refused'),
      );
      // A camera stream has no client publisher: `publish: null`, its source type echoed.
      const stream = ctx.streams.create(account, { source });
      res.status(201).json({
        id: stream.id,
        state: stream.state,
        source: { type: source.type },
        publish: null,
        expires_at_ms: stream.expiresAtMs,
        ttl_seconds: stream.ttlSeconds,
      });
      return;
    }
    const stream = ctx.streams.create(account);
    const token = await publishToken(ctx, stream);
    res.status(201).json({
      id: stream.id,
      state: stream.state,
      publish: { type: ctx.brand.room, url: ctx.publishUrl(), token },
      expires_at_ms: stream.expiresAtMs,
      ttl_seconds: stream.ttlSeconds,
    });
  });

  r.get('/streams/:id', (req, res) => {
    const stream = lifecycleStream(ctx, req.params.id, accountOf(res));
    res.json(ctx.streams.view(stream));
  });

  r.post('/streams/:id/keepalive', async (req, res) => {
    const stream = lifecycleStream(ctx, req.params.id, accountOf(res));
    if (stream.state !== 'active' && ctx.cfg.emulator.dialect === 'provider')
      throw detailError(404, 'stream_not_found', 'Stream not found');
    ctx.streams.keepalive(stream);
    res.json({
      id: stream.id,
      state: stream.state,
      expires_at_ms: stream.expiresAtMs,
      ttl_seconds: stream.ttlSeconds,
      stream_time_ms: stream.frames.streamTimeMs(),
      publish: stream.source ? null : { type: ctx.brand.room, url: ctx.publishUrl(), token: await publishToken(ctx, stream) },
    });
  });

  r.post('/streams/:id/viewer-token', async (req, res) => {
    const token = await viewerToken(ctx, uuidParam(req.params.id), accountOf(res));
    res.json({ view: { url: ctx.publishUrl(), token, expires_in_seconds: VIEWER_TOKEN_TTL_SECONDS } });
  });

  r.delete('/streams/:id', (req, res) => {
    const stream = lifecycleStream(ctx, req.params.id, accountOf(res));
    ctx.streams.end(stream, 'deleted');
    res.json({ id: stream.id, deleted: true });
  });

  return r;
}

import { randomUUID } from 'node:crypto';
import express from 'express';
import type { Router } from 'express';
import { streamError } from '../lib/errors';
import type { Account } from './accounts';
import type { EmulatorContext } from './context';
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
 * and so does an ended stream (its room is gone).
 */
async function viewerToken(ctx: EmulatorContext, id: string, account: Account): Promise<string> {
  const stream = ctx.streams.get(id);
  if (!stream || stream.accountId !== account.id) throw streamError(404, 'stream_not_found', `Stream ${id} not found`);
  if (stream.state !== 'active') throw streamError(404, 'stream_not_found', `Stream ${id} has ended`);
  return mintSubscribeToken(ctx.roomKeys, stream.id, `viewer-${randomUUID()}`, VIEWER_TOKEN_TTL_SECONDS);
}

/** POST/GET/DELETE /streams, POST /streams/{id}/keepalive and /viewer-token of the current interface. */
export function streamsRouter(ctx: EmulatorContext): Router {
  const r = express.Router();
  r.use('/streams', requireAccount(ctx));

  r.post('/streams', async (_req, res) => {
    const account = accountOf(res);
    // Creation requires credits (402 otherwise), like the provider.
    if (!ctx.accounts.canPay(account.id, 1)) {
      throw streamError(402, 'billing_denied', 'Insufficient credits to create a stream');
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
    const stream = ctx.streams.require(uuidParam(req.params.id), accountOf(res));
    res.json(ctx.streams.view(stream));
  });

  r.post('/streams/:id/keepalive', async (req, res) => {
    const stream = ctx.streams.require(uuidParam(req.params.id), accountOf(res));
    ctx.streams.keepalive(stream);
    const token = await publishToken(ctx, stream);
    res.json({
      id: stream.id,
      state: stream.state,
      expires_at_ms: stream.expiresAtMs,
      ttl_seconds: stream.ttlSeconds,
      stream_time_ms: stream.frames.streamTimeMs(),
      publish: { type: ctx.brand.room, url: ctx.publishUrl(), token },
    });
  });

  r.post('/streams/:id/viewer-token', async (req, res) => {
    const token = await viewerToken(ctx, uuidParam(req.params.id), accountOf(res));
    res.json({ view: { url: ctx.publishUrl(), token, expires_in_seconds: VIEWER_TOKEN_TTL_SECONDS } });
  });

  r.delete('/streams/:id', (req, res) => {
    const stream = ctx.streams.require(uuidParam(req.params.id), accountOf(res));
    ctx.streams.end(stream, 'deleted');
    res.json({ id: stream.id, deleted: true });
  });

  return r;
}

import express from 'express';
import type { Router } from 'express';
import { z } from 'zod';
import { detailError, validationError } from '../lib/errors';
import type { EmulatorContext } from './context';
import { uuidParam } from './http';
import type { SyntheticPublishers } from './publishers';
import type { MediaRoomServer } from './room';

/** Parses a control-API body, answering 422 in the contract's validation shape. */
function parse<T>(schema: z.ZodType<T>, body: unknown): T {
  const r = schema.safeParse(body ?? {});
  if (r.success) return r.data;
  throw validationError(
    r.error.issues[0]?.message ?? 'invalid body',
    r.error.issues.map((i) => ({ loc: ['body', ...i.path.map(String)], msg: i.message, type: i.code })),
  );
}

const faultSchema = z.strictObject({
  model: z.string().min(1).default('*'),
  count: z.number().int().positive().default(1),
  status: z.number().int().min(400).max(599).optional(),
  code: z.string().optional(),
  message: z.string().optional(),
  type: z.string().min(1).optional(),
  reset: z.boolean().optional(),
  latencyMs: z.number().int().min(0).max(120_000).optional(),
  retryAfterSeconds: z.number().min(0).optional(),
});

const whipFaultSchema = z.strictObject({
  count: z.number().int().positive().default(1),
  status: z.number().int().min(400).max(599).optional(),
  message: z.string().optional(),
  reset: z.boolean().optional(),
  latencyMs: z.number().int().min(0).max(120_000).optional(),
});

const modelStatusSchema = z.strictObject({ model: z.string().min(1), status: z.enum(['ready', 'unavailable']) });
const balanceSchema = z
  .strictObject({
    api_key: z.string().optional(),
    account_id: z.string().optional(),
    balance_microcents: z.number().int().min(0),
  })
  .refine((b) => !!b.api_key !== !!b.account_id, 'give exactly one of api_key, account_id');
const publisherSchema = z.strictObject({
  fps: z.number().positive().max(60).default(5),
  width: z.number().int().min(64).max(1920).default(320),
  height: z.number().int().min(48).max(1080).default(240),
});

/**
 * `/_emulator/*`: fault injection and state control for tests and demos. Mounted only when
 * `emulator.controlApi` is on; it takes no API key, so never enable it facing the internet.
 */
export function controlRouter(ctx: EmulatorContext, publishers: SyntheticPublishers, room: MediaRoomServer): Router {
  const r = express.Router();

  r.get('/state', (_req, res) => {
    res.json({
      region: ctx.cfg.emulator.region,
      streams: ctx.streams.active().map((s) => ({
        ...ctx.streams.view(s),
        account_id: s.accountId,
        publishing: publishers.isRunning(s.id),
        // Who publishes into its room: the participant's identity and track (a WHIP publisher's included).
        room_publication: room.stats(s.id)?.publication ?? null,
      })),
      whip_sessions: room.whipSessionCount,
      faults: ctx.faults.list(),
      models: ctx.models.list().data,
    });
  });

  r.post('/faults', (req, res) => {
    const spec = parse(faultSchema, req.body);
    ctx.faults.add(spec);
    res.status(201).json({ armed: spec });
  });
  r.delete('/faults', (_req, res) => {
    ctx.faults.clear();
    res.json({ cleared: true });
  });

  // The media room's next WHIP publishes (POST /whip/v1): a status with `{"error": message}`, a delay, a reset.
  r.post('/whip/faults', (req, res) => {
    const spec = parse(whipFaultSchema, req.body);
    ctx.whipFaults.add({ ...spec, model: 'whip' });
    res.status(201).json({ armed: spec });
  });
  r.delete('/whip/faults', (_req, res) => {
    ctx.whipFaults.clear();
    res.json({ cleared: true });
  });

  r.post('/models/status', (req, res) => {
    const { model, status } = parse(modelStatusSchema, req.body);
    if (!ctx.models.get(model)) throw detailError(404, 'model_not_found', `Unknown model ${model}`);
    ctx.models.setStatus(model, status);
    res.json({ model, status });
  });

  r.post('/balance', (req, res) => {
    const body = parse(balanceSchema, req.body);
    const account = body.api_key ? ctx.accounts.authenticateKey(body.api_key) : ctx.accounts.get(body.account_id!);
    if (!account) throw detailError(404, 'account_not_found', 'Unknown account');
    ctx.accounts.setBalance(account.id, body.balance_microcents);
    res.json(ctx.accounts.balance(account.id));
  });

  const activeStream = (id: string | undefined) => {
    const s = ctx.streams.get(uuidParam(id));
    if (!s || s.state !== 'active') throw detailError(404, 'stream_not_found', `No active stream ${id}`);
    return s;
  };

  r.post('/streams/:id/publisher', (req, res) => {
    const stream = activeStream(req.params.id);
    const opts = parse(publisherSchema, req.body);
    publishers.start(stream, opts);
    res.status(201).json({ stream_id: stream.id, publishing: true, ...opts });
  });
  r.delete('/streams/:id/publisher', async (req, res) => {
    const stream = activeStream(req.params.id);
    const stopped = publishers.stop(stream.id);
    // Frames already handed to the buffer are still encoding: answer once they are visible, so
    // "stopped" means the stream's frame fields no longer move.
    await stream.frames.drain();
    res.json({ stream_id: stream.id, publishing: false, stopped });
  });

  r.post('/streams/:id/expire', (req, res) => {
    const stream = activeStream(req.params.id);
    ctx.streams.end(stream, 'expired');
    res.json(ctx.streams.view(stream));
  });

  // The provider's system cleanup, now, whatever `emulator.reapIdleSeconds` says.
  r.post('/streams/:id/reap', (req, res) => {
    const stream = activeStream(req.params.id);
    ctx.streams.end(stream, 'reaped');
    res.json(ctx.streams.view(stream));
  });

  return r;
}

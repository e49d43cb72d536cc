/**
 * `POST /billing/checkout` and the hosted page it hands out. The provider answers `{url}` of a
 * hosted checkout; here the page is served by the emulator itself, on its own origin, and opening
 * it (a browser's GET) pays: the account is credited `amount_cents` once. Opening it again shows
 * that it was already paid and credits nothing.
 */
import { randomBytes } from 'node:crypto';
import express from 'express';
import type { Request, Response, Router } from 'express';
import { LRUCache } from 'lru-cache';
import { z } from 'zod';
import { validationError } from '../lib/errors';
import { MICROCENTS_PER_CENT } from './accounts';
import type { EmulatorContext } from './context';
import { accountOf, requireAccount } from './http';

/** The provider's minimum top-up. */
export const MIN_AMOUNT_CENTS = 100;
/** An emulator's own bound: credits stay exact integers of microcents (about 10 million dollars). */
export const MAX_AMOUNT_CENTS = 1_000_000_000;

interface Session {
  accountId: string;
  amountCents: number;
  createdAtMs: number;
  paidAtMs: number | null;
}

// Unknown fields are accepted, as the provider's OpenAI-style endpoints accept them.
const checkoutSchema = z.looseObject({
  amount_cents: z
    .number({ error: (i) => (i.input === undefined ? 'Field required' : 'Input should be a valid integer') })
    .int('Input should be a valid integer')
    .min(MIN_AMOUNT_CENTS, `Input should be greater than or equal to ${MIN_AMOUNT_CENTS}`)
    .max(MAX_AMOUNT_CENTS, `Input should be less than or equal to ${MAX_AMOUNT_CENTS}`),
});

const escapeHtml = (s: string): string =>
  s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

const dollars = (cents: number): string => `$${Math.floor(cents / 100)}.${String(cents % 100).padStart(2, '0')}`;

function page(res: Response, status: number, title: string, body: string): void {
  res
    .status(status)
    .type('html')
    .setHeader('cache-control', 'no-store')
    .send(
      `<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(title)}</title></head>` +
        `<body><h1>${escapeHtml(title)}</h1><p>${escapeHtml(body)}</p></body></html>\n`,
    );
}

/** Mounted under `/billing`: `POST /checkout` (API key) and `GET /checkout/{session}` (the hosted page, no key). */
export function checkoutRouter(ctx: EmulatorContext): Router {
  const r = express.Router();
  const cfg = ctx.cfg.emulator.checkout;
  const sessions = new LRUCache<string, Session>({ max: cfg.maxSessions });

  r.post('/checkout', requireAccount(ctx), (req, res) => {
    const parsed = checkoutSchema.safeParse(req.body ?? {});
    if (!parsed.success) {
      const details = parsed.error.issues.map((i) => ({ loc: ['body', ...i.path.map(String)], msg: i.message, type: i.code }));
      throw validationError('Request validation failed', details);
    }
    const id = `cs_${randomBytes(24).toString('base64url')}`;
    sessions.set(id, { accountId: accountOf(res).id, amountCents: parsed.data.amount_cents, createdAtMs: ctx.now(), paidAtMs: null });
    res.json({ url: `${ctx.baseUrl()}/billing/checkout/${id}` });
  });

  // What a browser does with the URL: open it. HEAD (link previews, checkers) shows the page's
  // status without paying.
  r.get('/checkout/:session', (req: Request, res: Response) => {
    const id = String(req.params.session);
    const s = sessions.get(id);
    if (!s) return page(res, 404, 'Unknown checkout', 'No checkout session has this address.');
    const now = ctx.now();
    if (s.paidAtMs !== null) {
      return page(
        res,
        200,
        'Already paid',
        `This checkout of ${dollars(s.amountCents)} was already paid; nothing more was charged or credited.`,
      );
    }
    if (now - s.createdAtMs > cfg.sessionTtlSeconds * 1000)
      return page(res, 410, 'Checkout expired', 'This checkout session has expired; create a new one.');
    if (req.method === 'HEAD') return page(res, 200, 'Checkout', `Checkout of ${dollars(s.amountCents)}.`);
    s.paidAtMs = now;
    ctx.accounts.credit(s.accountId, s.amountCents * MICROCENTS_PER_CENT);
    const balance = ctx.accounts.balance(s.accountId);
    page(res, 200, 'Payment received', `${dollars(s.amountCents)} was credited. Balance: ${dollars(balance.balance_cents)}.`);
  });

  return r;
}

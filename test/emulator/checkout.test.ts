/**
 * `POST /billing/checkout` → `{url}` of a page the emulator hosts; opening the page credits the
 * account once. On a real socket, with the emulator's clock injected for session expiry.
 */
import { startHarness } from './harness';
import type { Harness } from './harness';

const DEV = 'svc-local-dev';
const BROKE = 'svc-local-broke';
const T0 = 1_700_000_000_000;

type Json = Record<string, any>;

let h: Harness;
const clock = { now: T0 };
beforeAll(async () => {
  h = await startHarness({ emulator: { checkout: { sessionTtlSeconds: 60 } } }, { now: () => clock.now });
});
afterAll(() => h.close());

async function call(method: string, path: string, opts: { key?: string | null; body?: unknown } = {}) {
  const key = opts.key === undefined ? DEV : opts.key;
  const res = await fetch(`${h.url}${path}`, {
    method,
    headers: { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) },
    ...(opts.body === undefined ? {} : { body: JSON.stringify(opts.body) }),
  });
  const text = await res.text();
  let body: any = text;
  try {
    body = JSON.parse(text);
  } catch {
    /* an HTML page */
  }
  return { status: res.status, headers: res.headers, body };
}

const balanceCents = async (key: string) =>
  ((await call('GET', '/billing/accounts/me/balance', { key })).body as Json).balance_cents as number;
const checkout = async (key: string, amount: number): Promise<string> => {
  const r = await call('POST', '/billing/checkout', { key, body: { amount_cents: amount } });
  expect(r.status).toBe(200);
  return (r.body as Json).url as string;
};
/** Opens the hosted page as a browser does: a GET without the API key. */
const open = async (url: string, method = 'GET') => {
  const res = await fetch(url, { method });
  return { status: res.status, type: res.headers.get('content-type'), text: await res.text() };
};
const complete = (key: string) =>
  call('POST', '/v1beta/chat/completions', { key, body: { model: 'local/analyzer', messages: [{ role: 'user', content: 'hello' }] } });

describe('POST /billing/checkout', () => {
  it("answers the provider's shape, {url}, a page on the emulator's own origin", async () => {
    const r = await call('POST', '/billing/checkout', { body: { amount_cents: 100 } });
    expect(r.status).toBe(200);
    expect(Object.keys(r.body as Json)).toEqual(['url']);
    expect((r.body as Json).url).toMatch(new RegExp(`^${h.url}/billing/checkout/cs_[A-Za-z0-9_-]{32}$`));
  });

  it.each([
    ['below the minimum', { amount_cents: 99 }, 'too_small'],
    ['not an integer', { amount_cents: 100.5 }, 'invalid_type'],
    ['a string', { amount_cents: '500' }, 'invalid_type'],
    ['missing', {}, 'invalid_type'],
  ])('422 in the validation shape when amount_cents is %s', async (_what, body, type) => {
    const r = await call('POST', '/billing/checkout', { body });
    expect(r.status).toBe(422);
    expect(r.body).toMatchObject({
      error: 'validation_error',
      message: 'Request validation failed',
      details: [{ loc: ['body', 'amount_cents'], type }],
    });
  });

  it('needs an API key', async () => {
    const r = await call('POST', '/billing/checkout', { key: null, body: { amount_cents: 100 } });
    expect(r.status).toBe(401);
  });
});

describe('the hosted checkout page', () => {
  it('402 → checkout → the page credits the account once → completions work again', async () => {
    expect(await balanceCents(BROKE)).toBe(0);
    const denied = await complete(BROKE);
    expect(denied.status).toBe(402);
    expect(denied.body).toMatchObject({ detail: { error: { code: 'billing_denied' } } });

    const url = await checkout(BROKE, 250);
    expect(await balanceCents(BROKE)).toBe(0); // nothing is credited before the page is opened
    const paid = await open(url);
    expect(paid.status).toBe(200);
    expect(paid.type).toMatch(/^text\/html/);
    expect(paid.text).toContain('$2.50 was credited');
    expect(await balanceCents(BROKE)).toBe(250);

    const again = await open(url);
    expect(again.status).toBe(200);
    expect(again.text).toContain('already paid');
    expect(await balanceCents(BROKE)).toBe(250);

    expect((await complete(BROKE)).status).toBe(200);
  });

  it('HEAD shows the page without paying; a GET afterwards pays', async () => {
    const before = await balanceCents(DEV);
    const url = await checkout(DEV, 100);
    expect((await open(url, 'HEAD')).status).toBe(200);
    expect(await balanceCents(DEV)).toBe(before);
    await open(url);
    expect(await balanceCents(DEV)).toBe(before + 100);
  });

  it('an unknown session is 404; an expired one is 410 and credits nothing', async () => {
    expect((await open(`${h.url}/billing/checkout/cs_nope`)).status).toBe(404);
    const before = await balanceCents(DEV);
    const url = await checkout(DEV, 500);
    clock.now += 61_000;
    const r = await open(url);
    expect(r.status).toBe(410);
    expect(await balanceCents(DEV)).toBe(before);
  });
});

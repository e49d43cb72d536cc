/**
 * The gateway behind a real load balancer (Debian's HAProxy, `option forwardfor`, every request
 * arriving from its address 127.0.0.1). Clients are told apart by their loopback source address
 * (127.0.0.2, .3, …), which HAProxy puts in `X-Forwarded-For`.
 * - `server.trustProxy` set to the balancer: one client's flood of bad keys gets that client
 *   refused, nobody else; its own valid key still creates and opens results sockets; a spoofed
 *   `X-Forwarded-For` moves nobody's budget; access lines carry the real client.
 * - unset: bad keys are budgeted on the balancer's address, and keys accepted before still pass
 *   (the budget's positive cache), over HTTP and on the results socket.
 */
import http from 'node:http';
import { startHaproxy } from '../helpers/haproxy';
import type { Balancer } from '../helpers/haproxy';
import { logLines } from '../helpers/log-lines';
import { KEY, KEY_B, frameBody, startStack } from '../helpers/stack';
import { openResults } from '../helpers/results-socket';
import type { Stack } from '../helpers/stack';
import { deadline, sleep } from '../helpers/time';

const BALANCER = '127.0.0.1';
const FLOODER = '127.0.0.2';
const CUSTOMER = '127.0.0.3';
const NEWCOMER = '127.0.0.4';
const DIRECT = '127.0.0.5';
/** The default failed-authentication budget per client address and minute. */
const BUDGET = 30;

interface Answer {
  status: number;
  body: any;
  headers: http.IncomingHttpHeaders;
}

/** One request to `base` from the loopback address `from` (its own connection). */
function call(
  base: string,
  from: string,
  method: string,
  path: string,
  o: { key?: string | null; body?: unknown; headers?: Record<string, string> } = {},
): Promise<Answer> {
  const url = new URL(path, base);
  const body = o.body === undefined ? undefined : JSON.stringify(o.body);
  const headers: Record<string, string> = { ...o.headers };
  if (o.key !== null) headers.authorization = `Bearer ${o.key ?? KEY}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: url.hostname, port: url.port, path: url.pathname, method, headers, localAddress: from, agent: false },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => (text += d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text ? JSON.parse(text) : null, headers: res.headers }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

const create = (base: string, from: string, key: string, headers?: Record<string, string>) =>
  call(base, from, 'POST', '/v0.2/streams', { key, body: frameBody(), headers });

/** `n` creates with made-up keys from `from`: their statuses in order. */
async function flood(base: string, from: string, n: number): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push((await create(base, from, `svc-made-up-${i}`)).status);
  return out;
}

/** A results socket from `from`: resolves with its first result, or rejects with its close. */
async function firstResult(base: string, from: string, streamId: string, key: string): Promise<Record<string, unknown>> {
  const s = await openResults(base, streamId, key, { ws: { localAddress: from } });
  try {
    const [first] = await s.waitFor(1, 15_000).catch(async (err: Error) => {
      const c = await s.closed;
      throw new Error(`${err.message} (closed ${c.code} ${c.reason})`);
    });
    return first!;
  } finally {
    s.ws.close();
  }
}

/** How a results socket opened from `from` with `key` is closed. */
async function socketClose(base: string, from: string, streamId: string, key: string): Promise<{ code: number; reason: string }> {
  const s = await openResults(base, streamId, key, { ws: { localAddress: from } });
  return deadline(s.closed, 10_000, 'results socket close');
}

interface LogLine {
  level: number;
  msg: string;
  req?: { method: string; url: string; remoteAddress?: string };
  res?: { statusCode: number };
}

function useBalancedStack(trustProxy: unknown) {
  const log = logLines();
  const parts: { stack?: Stack; lb?: Balancer } = {};
  beforeAll(async () => {
    parts.stack = await startStack(trustProxy === undefined ? {} : { server: { trustProxy } }, {}, { log: log.sink });
    parts.lb = await startHaproxy({ servers: [{ name: 'gw', url: parts.stack.url }] });
    await parts.lb.waitFor('gw', 'UP');
  });
  afterAll(async () => {
    await parts.lb?.stop();
    await parts.stack?.close();
  });
  const lines = () => log.lines.map((l) => JSON.parse(l) as LogLine);
  return {
    stack: () => parts.stack!,
    lb: () => parts.lb!.url,
    lines,
    access: (method: string, path: string) => lines().filter((l) => l.req?.method === method && l.req.url === path && l.res !== undefined),
  };
}

describe('behind haproxy with server.trustProxy = the balancer’s address', () => {
  const env = useBalancedStack([BALANCER]);

  test('a flood of bad keys gets the flooder refused, nobody else; valid keys create and open results sockets', async () => {
    const lb = env.lb();
    // The flooder's own key, used once before: the gateway has verified it.
    const own = await create(lb, FLOODER, KEY_B);
    expect(own.status).toBe(201);
    await call(lb, FLOODER, 'DELETE', `/v0.2/streams/${own.body.stream_id}`, { key: KEY_B });

    const statuses = await flood(lb, FLOODER, BUDGET + 5);
    expect(statuses).toEqual([...Array<number>(BUDGET).fill(401), ...Array<number>(5).fill(503)]);
    const refused = await create(lb, FLOODER, 'svc-made-up-again');
    expect(refused.status).toBe(503);
    expect(refused.body).toMatchObject({ error: 'auth_rate_limited' });
    expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);

    // Another client through the same balancer, with a key the gateway has never seen: unaffected.
    const other = await create(lb, CUSTOMER, KEY);
    expect(other.status).toBe(201);
    expect(await firstResult(lb, CUSTOMER, other.body.stream_id, KEY)).toHaveProperty('stream_id', other.body.stream_id);
    // The flooder's own valid key still creates and opens its socket; its unknown keys get 1013.
    const again = await create(lb, FLOODER, KEY_B);
    expect(again.status).toBe(201);
    expect(await firstResult(lb, FLOODER, again.body.stream_id, KEY_B)).toHaveProperty('stream_id', again.body.stream_id);
    expect(await socketClose(lb, FLOODER, again.body.stream_id, 'svc-made-up-socket')).toMatchObject({ code: 1013 });
    // A third client's bad key: its own budget (401, not 503).
    expect((await create(lb, NEWCOMER, 'svc-made-up-newcomer')).status).toBe(401);
    expect(await socketClose(lb, NEWCOMER, again.body.stream_id, 'svc-made-up-socket')).toMatchObject({ code: 1008 });

    for (const [from, key, id] of [
      [CUSTOMER, KEY, other.body.stream_id],
      [FLOODER, KEY_B, again.body.stream_id],
    ] as const) {
      expect((await call(lb, from, 'DELETE', `/v0.2/streams/${id}`, { key })).status).toBe(200);
    }

    // One warning, naming the flooder, not the balancer.
    const warned = env.lines().filter((l) => l.msg.startsWith('failed-authentication budget used up'));
    expect(warned.map((l) => l.msg)).toEqual([
      `failed-authentication budget used up by ${FLOODER}: its unknown keys are refused for the rest of the minute`,
    ]);
  });

  test('a spoofed X-Forwarded-For moves no budget: not through the balancer, not from an untrusted peer', async () => {
    const lb = env.lb();
    // The flooder (over budget since the test above) claims to be the customer: still the flooder.
    expect((await create(lb, FLOODER, 'svc-made-up-spoof', { 'x-forwarded-for': CUSTOMER })).status).toBe(503);
    // A peer that is not the balancer names the flooder: ignored, it is itself (401, its own budget).
    const direct = await create(env.stack().url, DIRECT, 'svc-made-up-direct', { 'x-forwarded-for': FLOODER });
    expect(direct.status).toBe(401);
    const lines = env.access('POST', '/v0.2/streams');
    expect(lines.at(-2)?.req?.remoteAddress).toBe(FLOODER);
    expect(lines.at(-1)?.req?.remoteAddress).toBe(DIRECT);
  });

  test('access lines carry the real client address, Express routes and the passthrough alike', async () => {
    const lb = env.lb();
    expect((await call(lb, CUSTOMER, 'GET', '/v1beta/models')).status).toBe(200);
    const creates = env.access('POST', '/v0.2/streams');
    expect(creates.filter((l) => l.res?.statusCode === 401).map((l) => l.req?.remoteAddress)).toEqual([
      ...Array<string>(BUDGET).fill(FLOODER),
      NEWCOMER,
      DIRECT,
    ]);
    expect(creates.filter((l) => l.res?.statusCode === 201).map((l) => l.req?.remoteAddress)).toEqual([FLOODER, CUSTOMER, FLOODER]);
    expect(env.lines().filter((l) => l.req?.remoteAddress === BALANCER)).toEqual([]);
    // The passthrough's line is written in batches: wait for it.
    let proxied: LogLine[] = [];
    for (const until = Date.now() + 10_000; proxied.length === 0 && Date.now() < until; await sleep(20))
      proxied = env.access('GET', '/v1beta/models');
    expect(proxied.map((l) => l.req?.remoteAddress)).toEqual([CUSTOMER]);
  });
});

describe('behind haproxy with server.trustProxy unset', () => {
  const env = useBalancedStack(undefined);

  test('bad keys are budgeted on the balancer’s address; keys accepted before still create and open results sockets', async () => {
    const lb = env.lb();
    // A customer's key in use before the flood.
    const before = await create(lb, CUSTOMER, KEY);
    expect(before.status).toBe(201);

    expect(await flood(lb, FLOODER, BUDGET + 5)).toEqual([...Array<number>(BUDGET).fill(401), ...Array<number>(5).fill(503)]);

    // The customer's key passes the balancer's spent budget: HTTP and results socket (no 1013).
    const after = await create(lb, CUSTOMER, KEY);
    expect(after.status).toBe(201);
    expect(await firstResult(lb, CUSTOMER, after.body.stream_id, KEY)).toHaveProperty('stream_id', after.body.stream_id);
    expect((await call(lb, CUSTOMER, 'POST', `/v0.2/streams/${before.body.stream_id}/keepalive`, { key: KEY })).status).toBe(200);
    // Unknown keys from anyone behind the balancer are refused, and so is a valid key the gateway
    // has not verified yet: it cannot be told from a probe until the minute ends (set trustProxy).
    expect((await create(lb, NEWCOMER, 'svc-made-up-newcomer')).status).toBe(503);
    expect((await create(lb, NEWCOMER, KEY_B)).status).toBe(503);
    expect(await socketClose(lb, NEWCOMER, after.body.stream_id, KEY_B)).toMatchObject({ code: 1013 });

    for (const s of [before, after])
      expect((await call(lb, CUSTOMER, 'DELETE', `/v0.2/streams/${s.body.stream_id}`, { key: KEY })).status).toBe(200);

    // What goes wrong without the setting is in the logs: every line shows the balancer.
    expect(new Set(env.access('POST', '/v0.2/streams').map((l) => l.req?.remoteAddress))).toEqual(new Set([BALANCER]));
    const warned = env.lines().filter((l) => l.msg.startsWith('failed-authentication budget used up'));
    expect(warned).toHaveLength(1);
    expect(warned[0]!.msg).toContain(`by ${BALANCER}`);
    expect(warned[0]!.msg).toContain("server.trustProxy is off: behind a load balancer this is the balancer's address");
  });
});

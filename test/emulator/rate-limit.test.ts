/**
 * The provider's per-user completion rate limit and the 429 fault of the control API, on real
 * sockets. Windows are one wall-clock second of the emulator's clock, which the tests inject and
 * move: the order of requests and clock steps is the test, not wall time.
 */
import { startEmulator } from '../../src/emulator/server';
import type { RunningEmulator } from '../../src/emulator/server';
import { createLogger } from '../../src/lib/logger';
import { startHarness } from './harness';
import type { Harness } from './harness';
import { testConfig } from '../helpers/config';

const DEV = 'svc-local-dev';
const DEV2 = 'svc-local-dev2';
const T0 = 1_700_000_000_500; // half way through a second
const SECOND = Math.floor(T0 / 1000);

type Json = Record<string, any>;

async function complete(url: string, key: string, extra: Record<string, unknown> = {}) {
  const res = await fetch(`${url}/v1beta/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    body: JSON.stringify({ model: 'local/analyzer', messages: [{ role: 'user', content: 'hi' }], ...extra }),
  });
  const text = await res.text();
  const h = (name: string) => res.headers.get(name);
  return {
    status: res.status,
    text,
    limit: h('x-ratelimit-limit'),
    remaining: h('x-ratelimit-remaining'),
    reset: h('x-ratelimit-reset'),
    retryAfter: h('retry-after'),
    type: h('content-type'),
  };
}

describe('per-user completion rate limit (emulator.rateLimit)', () => {
  let h: Harness;
  const clock = { now: T0 };
  beforeAll(async () => {
    h = await startHarness({ emulator: { rateLimit: { completionsPerSecond: 3 } } }, { now: () => clock.now });
  });
  afterAll(() => h.close());

  it('counts x-ratelimit-remaining down on successful answers, then answers 429 with retry-after; the next second starts over', async () => {
    const seen = [];
    for (let i = 0; i < 3; i++) seen.push(await complete(h.url, DEV));
    expect(seen.map((r) => [r.status, r.limit, r.remaining, r.reset])).toEqual([
      [200, '3', '2', String(SECOND + 1)],
      [200, '3', '1', String(SECOND + 1)],
      [200, '3', '0', String(SECOND + 1)],
    ]);
    expect(seen.every((r) => r.retryAfter === null)).toBe(true);

    const limited = await complete(h.url, DEV);
    expect([limited.status, limited.limit, limited.remaining, limited.reset, limited.retryAfter]).toEqual([
      429,
      '3',
      '0',
      String(SECOND + 1),
      '1',
    ]);
    expect(JSON.parse(limited.text)).toEqual({
      detail: {
        error: { message: expect.stringContaining('3 requests per second'), type: 'rate_limit_error', code: 'rate_limit_exceeded' },
      },
    });

    // another user has a window of its own
    const other = await complete(h.url, DEV2);
    expect([other.status, other.remaining]).toEqual([200, '2']);

    clock.now += 1000;
    const next = await complete(h.url, DEV);
    expect([next.status, next.remaining, next.reset]).toEqual([200, '2', String(SECOND + 2)]);
  });

  it('a streamed answer carries the headers too', async () => {
    clock.now += 1000;
    const r = await complete(h.url, DEV, { stream: true });
    expect(r.status).toBe(200);
    expect(r.type).toMatch(/^text\/event-stream/);
    expect([r.limit, r.remaining]).toEqual(['3', '2']);
  });
});

describe('rate limit off (the default)', () => {
  it('answers without x-ratelimit headers', async () => {
    const h = await startHarness();
    try {
      const r = await complete(h.url, DEV);
      expect([r.status, r.limit, r.remaining, r.reset]).toEqual([200, null, null, null]);
    } finally {
      await h.close();
    }
  });
});

describe('a 429 armed through the control API', () => {
  let emu: RunningEmulator;
  beforeAll(async () => {
    const cfg = testConfig();
    emu = await startEmulator(cfg, createLogger('silent'), { now: () => T0 });
  });
  afterAll(() => emu.close());

  const arm = async (fault: Json) => {
    const res = await fetch(`${emu.url}/_emulator/faults`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(fault),
    });
    expect(res.status).toBe(201);
  };

  it("answers the provider's rate-limit 429 (retry-after, x-ratelimit-*) for the armed count, then recovers", async () => {
    await arm({ status: 429, count: 2, retryAfterSeconds: 2 });
    for (let i = 0; i < 2; i++) {
      const r = await complete(emu.url, DEV);
      expect([r.status, r.retryAfter, r.remaining, r.reset]).toEqual([429, '2', '0', String(SECOND + 2)]);
      expect(JSON.parse(r.text)).toMatchObject({ detail: { error: { type: 'rate_limit_error', code: 'rate_limit_exceeded' } } });
    }
    expect((await complete(emu.url, DEV)).status).toBe(200);
  });

  it("retry-after defaults to 1; a model provider's 429 is armed by its code", async () => {
    await arm({ status: 429 });
    expect((await complete(emu.url, DEV)).retryAfter).toBe('1');
    await arm({ status: 429, code: 'upstream_http_429', model: 'local/analyzer' });
    const r = await complete(emu.url, DEV);
    expect(r.status).toBe(429);
    expect(JSON.parse(r.text)).toMatchObject({ detail: { error: { type: 'upstream_error', code: 'upstream_http_429' } } });
  });
});

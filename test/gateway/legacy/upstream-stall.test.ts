/**
 * A stalled completion upstream. With a 1 s cadence the client must get an
 * `upstream_timeout` error result within the tick's deadline (a few intervals), not after
 * 4 × 30 s attempts; and once the breaker opens, ticks answer at once without calling the
^ * upstream. Real emulator, stall armed through its control API (`latencyMs` fault).
 */
import { KEY, frameBody, http, startStack } from '../../helpers/stack';
import { openResults } from '../../helpers/results-socket';
import type { Stack } from '../../helpers/stack';

let stack: Stack;
afterEach(async () => {
  await stack.close();
});

async function arm(fault: Record<string, unknown>): Promise<void> {
  const r = await fetch(`${stack.emulator.url}/_emulator/faults`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(fault),
  });
  expect(r.status).toBe(201);
}

/** Completion attempts the emulator has taken the armed fault for. */
async function attempts(): Promise<number> {
  const state = (await (await fetch(`${stack.emulator.url}/_emulator/state`)).json()) as { faults: { count: number }[] };
  return 1000 - (state.faults[0]?.count ?? 0);
}

it('a stalled completion gives a 1 s-cadence client an upstream_timeout result, then the open breaker answers without calling', async () => {
  stack = await startStack({ upstreamBreaker: { threshold: 2, openMs: 600_000 } });
  await arm({ model: '*', count: 1000, latencyMs: 60_000 });
  const created = await http(stack.url, 'POST', '/v0.2/streams', { body: frameBody({ interval_seconds: 1 }) });
  expect(created.status).toBe(201);
  const id = (created.body as { stream_id: string }).stream_id;
  const sock = await openResults(stack.url, id, KEY);
  // The first result: the tick's deadline (4 intervals) passed while attempts stalled.
  const [first] = await sock.waitFor(1, 20_000);
  expect(first).toMatchObject({ ok: false, stream_id: id });
  expect(first!.error).toMatch(/^upstream_timeout \(504\): /);
  // Two stalled attempts opened the breaker: later ticks fail fast, and the emulator sees no more attempts.
  const [, second] = await sock.waitFor(2, 20_000);
  expect(second!.error).toMatch(/^upstream_unavailable \(503\): /);
  const attemptsThen = await attempts();
  const [, , third, fourth] = await sock.waitFor(4, 20_000);
  expect([third!.error, fourth!.error]).toEqual([
    expect.stringMatching(/^upstream_unavailable/),
    expect.stringMatching(/^upstream_unavailable/),
  ]);
  expect(await attempts()).toBe(attemptsThen);
  // The ticks in flight at once (legacy.maxInFlight) each made an attempt, and the first one retried,
  // before two failures opened the breaker.
  expect(attemptsThen).toBeLessThanOrEqual(stack.cfg.legacy.maxInFlight + 1);
  expect(stack.gateway.gateway.upstream.circuitState).toBe('open');
  sock.ws.close();
});

it('an unreachable completion upstream gives an error result without internal addresses', async () => {
  stack = await startStack();
  await arm({ model: '*', count: 1000, reset: true });
  const created = await http(stack.url, 'POST', '/v0.2/streams', { body: frameBody({ interval_seconds: 0.5 }) });
  expect(created.status).toBe(201);
  const sock = await openResults(stack.url, (created.body as { stream_id: string }).stream_id, KEY);
  const [first] = await sock.waitFor(1, 20_000);
  expect(first).toMatchObject({ ok: false });
  expect(first!.error).toMatch(/^upstream_(unreachable \(502\)|unavailable \(503\)): /);
  expect(first!.error).not.toMatch(/127\.0\.0\.1|ECONNRE|socket|other side|http:/i);
  sock.ws.close();
});

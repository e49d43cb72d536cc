/**
 * Proxied requests' telemetry in batches: nothing runs while a request is proxied, a batch runs in
 * arrival order after its window, at once when full, and before a scrape or a counter flush reads
 * what it feeds; the access line keeps the time the request ended, not the time it was written.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { PassthroughEvent } from '../../../src/gateway/passthrough';
import { memoryStore } from '../../../src/gateway/store/memory';
import { passthroughTelemetry } from '../../../src/gateway/telemetry/http';
import { GatewayMetrics } from '../../../src/gateway/telemetry/metrics';
import { SettledBatch } from '../../../src/gateway/telemetry/settled-batch';
import { DeprecationUsage } from '../../../src/gateway/telemetry/usage';
import { PER_KEY_PASSTHROUGH } from '../../../src/gateway/telemetry/usage-keys';
import { createLogger } from '../../../src/lib/logger';
import { FakeClock } from '../../helpers/fake-clock';

function capture() {
  const written: string[] = [];
  const destination = { write: (s: string) => void written.push(s) };
  return {
    logger: createLogger('info', 'gateway', destination),
    lines: () => written.map((l) => JSON.parse(l) as Record<string, unknown>),
  };
}

/** A batch of numbers on a fake clock, a 50 ms window, and what it ran. */
function numbers(max: number) {
  const clock = new FakeClock();
  const ran: number[] = [];
  const batch = new SettledBatch<number>((n) => ran.push(n), capture().logger, { windowMs: 50, max, clock });
  return { clock, ran, batch };
}

describe('SettledBatch', () => {
  test('runs nothing at push, then the whole batch in arrival order after its window, from one timer', () => {
    const { clock, ran, batch } = numbers(10);
    batch.push(1);
    clock.advance(30);
    batch.push(2);
    batch.push(3);
    expect(ran).toEqual([]);
    expect(clock.pending).toBe(1);
    clock.advance(19);
    expect(ran).toEqual([]);
    clock.advance(1);
    expect(ran).toEqual([1, 2, 3]);
    expect(batch.size).toBe(0);
    expect(clock.pending).toBe(0);
    // The next push opens a new window.
    batch.push(4);
    clock.advance(50);
    expect(ran).toEqual([1, 2, 3, 4]);
  });

  test('a full batch runs at once and leaves no timer armed', () => {
    const { clock, ran, batch } = numbers(3);
    batch.push(1);
    batch.push(2);
    expect(ran).toEqual([]);
    batch.push(3);
    expect(ran).toEqual([1, 2, 3]);
    expect(clock.pending).toBe(0);
  });

  test('close runs what waits, then each later event at once, with no timer left', () => {
    const { clock, ran, batch } = numbers(10);
    batch.push(1);
    batch.close();
    expect(ran).toEqual([1]);
    batch.push(2);
    expect(ran).toEqual([1, 2]);
    expect(clock.pending).toBe(0);
  });

  test('flush runs what waits now; a handler that throws is logged and the rest still runs', () => {
    const clock = new FakeClock();
    const { logger, lines } = capture();
    const ran: number[] = [];
    const batch = new SettledBatch<number>(
      (n) => {
        if (n === 2) throw new Error('bad event');
        ran.push(n);
      },
      logger,
      { windowMs: 50, max: 10, clock },
    );
    batch.flush();
    [1, 2, 3].forEach((n) => batch.push(n));
    batch.flush();
    expect(ran).toEqual([1, 3]);
    expect(clock.pending).toBe(0);
    expect(lines()).toEqual([
      expect.objectContaining({ level: 50, msg: 'request telemetry failed', err: expect.objectContaining({ message: 'bad event' }) }),
    ]);
  });
});

describe('passthrough telemetry through the batch', () => {
  const endedAt = Date.parse('2026-11-20T10:11:12.345Z');
  const event = (): PassthroughEvent => ({
    prefix: 'v1beta',
    outcome: 'ok',
    status: 200,
    upstreamHeadersMs: 3,
    durationMs: 4.4,
    settledAtMs: endedAt + 0.6,
    requestId: 'req-1',
    authorization: 'Bearer ovs-batch-key',
    userAgent: 'svc-python/1.4.2',
    req: { method: 'GET', url: '/v1beta/models?limit=3', socket: {} } as unknown as IncomingMessage,
    res: { statusCode: 200, writableFinished: true } as unknown as ServerResponse,
  });

  test('a scrape and a counter flush take what waits; the access line says when the request ended', async () => {
    const clock = new FakeClock();
    const { logger, lines } = capture();
    const metrics = new GatewayMetrics({ activeStreams: () => 0, socketConnections: () => 0 }, { defaultMetrics: false });
    const store = memoryStore();
    const usage = new DeprecationUsage(store, logger, clock);
    const proxied = passthroughTelemetry(logger, { log: true, metrics, httpMetrics: true, clientAddress: () => '10.0.0.7' });
    const seen: string[] = [];
    const batch = new SettledBatch<PassthroughEvent>(
      (e) => {
        proxied(e);
        usage.passthrough('k1', e.prefix, 'svc-python/1.4');
        seen.push(e.requestId);
      },
      logger,
      { clock },
    );
    metrics.beforeScrape(batch.flush);
    usage.beforeFlush(batch.flush);

    batch.push(event());
    expect(lines()).toEqual([]);
    const text = await metrics.text();
    expect(text).toContain('gateway_passthrough_requests_total{prefix="v1beta",outcome="ok"} 1');
    expect(text).toContain('gateway_http_requests_total{method="GET",route="/v1beta/models",status="200"} 1');
    const [line] = lines();
    expect(line).toMatchObject({
      reqId: 'req-1',
      time: '2026-11-20T10:11:12.345Z',
      responseTime: 4,
      msg: 'GET /v1beta/models?limit=[redacted] 200 4ms',
    });

    batch.push({ ...event(), requestId: 'req-2' });
    await usage.flush();
    expect(seen).toEqual(['req-1', 'req-2']);
    expect(await store.hgetall(`${PER_KEY_PASSTHROUGH}k1`)).toMatchObject({ v1beta: 2, 'ua:svc-python/1.4': 2 });
  });
});

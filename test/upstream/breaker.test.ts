/**
 * The upstream circuit breaker: its state machine on an injected clock, and on the real client
 * against a real socket (an outage stops costing upstream attempts; a probe closes it again).
 */
import { brandOf } from '../../src/brand';
import { CircuitBreaker, isUpstreamDown } from '../../src/upstream/breaker';
import { UpstreamClient, UpstreamError } from '../../src/upstream/client';
import { FakeClock } from '../helpers/fake-clock';
import { FakeUpstream, json, reset, sampleCompletion, streamErr } from './fake-upstream';

const brand = brandOf({ brand: 'svc', roomVendor: 'room' });
const KEY = 'svc-test-key-0123456789';
const down = new UpstreamError({ kind: 'network', status: 502, message: 'refused' });
const answered4xx = new UpstreamError({ kind: 'http', status: 404, message: 'nope' });

describe('CircuitBreaker', () => {
  it('opens after `threshold` consecutive upstream failures, probes once after openMs, closes on success', () => {
    const clock = new FakeClock(0);
    const states: string[] = [];
    const b = new CircuitBreaker({ threshold: 3, openMs: 1000, clock, onChange: (s) => states.push(s) });
    const fail = (n: number) => {
      for (let i = 0; i < n; i++) {
        b.admit();
        b.record(down);
      }
    };
    fail(2);
    b.admit();
    b.record(); // an answer resets the count
    fail(3);
    expect(b.state).toBe('open');
    expect(() => b.admit()).toThrow(expect.objectContaining({ code: 'upstream_circuit_open', status: 503 }));
    clock.set(999);
    expect(() => b.admit()).toThrow(expect.objectContaining({ retryAfterMs: 1 }));
    clock.set(1000);
    b.admit(); // the one probe
    expect(() => b.admit()).toThrow(expect.objectContaining({ code: 'upstream_circuit_open' }));
    b.record(down); // failed probe: open again for openMs
    expect(b.state).toBe('open');
    clock.set(2000);
    b.admit();
    b.record(answered4xx); // a 4xx answer proves the upstream is up
    expect(b.state).toBe('closed');
    expect(states).toEqual(['open', 'half-open', 'open', 'half-open', 'closed']);
  });

  it('counts only failures of the upstream as a whole; our own aborts leave it as it is', () => {
    expect(isUpstreamDown(down)).toBe(true);
    expect(isUpstreamDown(new UpstreamError({ kind: 'timeout', status: 504, message: 't' }))).toBe(true);
    expect(isUpstreamDown(new UpstreamError({ kind: 'http', status: 500, message: 'x' }))).toBe(true);
    expect(isUpstreamDown(new UpstreamError({ kind: 'http', status: 503, upstreamCode: 'model_unavailable', message: 'x' }))).toBe(false);
    expect(isUpstreamDown(answered4xx)).toBe(false);
    const clock = new FakeClock(0);
    const b = new CircuitBreaker({ threshold: 1, openMs: 10, clock });
    b.admit();
    b.record(down);
    clock.set(10);
    b.admit();
    b.record(new DOMException('aborted', 'AbortError'));
    // The aborted probe freed the probe slot without closing or reopening.
    expect(b.state).toBe('half-open');
    b.admit();
  });

  it('threshold 0 disables it', () => {
    const b = new CircuitBreaker({ threshold: 0, openMs: 10 });
    for (let i = 0; i < 10; i++) {
      b.admit();
      b.record(down);
    }
    expect(b.state).toBe('closed');
  });
});

describe('UpstreamClient with a breaker', () => {
  let fake: FakeUpstream;
  let client: UpstreamClient;
  afterEach(async () => {
    await client.close();
    await fake.close();
  });

  it('stops calling an upstream that keeps failing: completions fail at once, without retries or fallbacks', async () => {
    const clock = new FakeClock(0);
    fake = await FakeUpstream.start(reset);
    client = new UpstreamClient({ baseUrl: fake.url, brand, retry: { scale: 0.001 }, breaker: { threshold: 4, openMs: 5000, clock } });
    const req = { model: 'a/m', messages: [{ role: 'user' as const, content: 'hi' }] };
    // First call: 4 attempts on a/m (all reset) open the circuit; the fallback is refused at once.
    await expect(client.chatCompletion(KEY, req, { fallbackModels: ['b/m'] })).rejects.toMatchObject({ code: 'upstream_circuit_open' });
    expect(fake.requests).toHaveLength(4);
    for (let i = 0; i < 10; i++) {
      await expect(client.chatCompletion(KEY, req, { fallbackModels: ['b/m', 'c/m'] })).rejects.toMatchObject({
        code: 'upstream_circuit_open',
      });
    }
    expect(fake.requests).toHaveLength(4);
    // After openMs one probe goes out; the upstream is back, so the circuit closes.
    fake.reply(json(200, sampleCompletion('a/m')));
    clock.set(5000);
    await expect(client.chatCompletion(KEY, req)).resolves.toMatchObject({ model: 'a/m' });
    expect(client.circuitState).toBe('closed');
    expect(fake.requests).toHaveLength(5);
  });

  it('a model’s own 503 does not open it', async () => {
    fake = await FakeUpstream.start(streamErr(503, 'model_unavailable'));
    client = new UpstreamClient({ baseUrl: fake.url, brand, retry: { scale: 0.001 }, breaker: { threshold: 2, openMs: 5000 } });
    const req = { model: 'a/m', messages: [{ role: 'user' as const, content: 'hi' }] };
    await expect(client.chatCompletion(KEY, req)).rejects.toMatchObject({ code: 'model_unavailable' });
    await expect(client.chatCompletion(KEY, req)).rejects.toMatchObject({ code: 'model_unavailable' });
    expect(client.circuitState).toBe('closed');
    expect(fake.requests).toHaveLength(6); // 2 calls × the contract's 3 attempts, none refused by the breaker
  });
});

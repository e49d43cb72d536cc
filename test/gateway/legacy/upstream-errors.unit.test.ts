/**
 * The one upstream → legacy mapping, as a table: which upstream statuses are the client's own
 * (401/402/403 on a call made with its key) and which are the gateway's (502/503/504), and that no
 * client message carries the upstream's text (addresses, URLs).
 */
import { ServiceError } from '../../../src/lib/errors';
import { UpstreamError } from '../../../src/upstream/errors';
import { circuitOpenError } from '../../../src/upstream/breaker';
import { UPSTREAM_CONTEXTS, legacyResultError, toLegacyError } from '../../../src/gateway/legacy/contract/upstream-errors';

const http = (status: number, upstreamCode?: string) =>
  new UpstreamError({ kind: 'http', status, upstreamCode, message: `secret upstream text http://10.0.0.7:9000/x ${status}` });
const network = new UpstreamError({ kind: 'network', status: 502, message: 'Upstream unreachable: connect ECONNREFUSED 127.0.0.1:4567' });
const timeout = new UpstreamError({ kind: 'timeout', status: 504, message: 'Upstream timed out: Headers Timeout Error' });

type Row = [name: string, err: UpstreamError, ctx: keyof typeof UPSTREAM_CONTEXTS, status: number, code: string];
const table: Row[] = [
  // The client's key was refused: the client's own error.
  ['create 401', http(401), 'create', 401, 'unauthorized'],
  ['authenticate 403', http(403), 'authenticate', 403, 'forbidden'],
  ['create 402', http(402, 'billing_denied'), 'create', 402, 'insufficient_credits'],
  ['keepalive 403', http(403), 'keepalive', 403, 'forbidden'],
  // The upstream limiting or failing the gateway: never the client's 401/429.
  ['create 429', http(429), 'create', 503, 'upstream_unavailable'],
  ['authenticate 429', http(429), 'authenticate', 503, 'upstream_unavailable'],
  ['models 401', http(401), 'models', 502, 'upstream_error'],
  ['models 403', http(403), 'models', 502, 'upstream_error'],
  ['models 429', http(429), 'models', 503, 'upstream_unavailable'],
  ['models 404', http(404), 'models', 502, 'upstream_error'],
  ['models 500', http(500), 'models', 502, 'upstream_error'],
  ['balance 404', http(404), 'balance', 502, 'upstream_error'],
  ['create 400', http(400), 'create', 502, 'upstream_error'],
  ['create 503', http(503), 'create', 503, 'upstream_unavailable'],
  ['keepalive 504', http(504), 'keepalive', 504, 'upstream_timeout'],
  ['keepalive network', network, 'keepalive', 502, 'upstream_unreachable'],
  ['authenticate timeout', timeout, 'authenticate', 504, 'upstream_timeout'],
  ['create circuit open', circuitOpenError(1500), 'create', 503, 'upstream_unavailable'],
];

describe('toLegacyError', () => {
  it.each(table)('%s → legacy status and code', (_name, err, ctx, status, code) => {
    const out = toLegacyError(err, UPSTREAM_CONTEXTS[ctx]);
    expect(out).toBeInstanceOf(ServiceError);
    const e = out as ServiceError;
    expect([e.status, e.code]).toEqual([status, code]);
    expect(e.shape).toBe('legacy');
    expect(e.status).not.toBe(429);
    expect(e.message).not.toMatch(/127\.0\.0\.1|10\.0\.0\.7|http:|ECONNREFUSED|secret/);
  });

  it('passes a retry-after hint on with a 503', () => {
    const err = new UpstreamError({ kind: 'http', status: 429, message: 'slow down', retryAfterMs: 2500 });
    const e = toLegacyError(err, UPSTREAM_CONTEXTS.models) as ServiceError;
    expect(e.options.headers).toEqual({ 'retry-after': '3' });
  });

  it('leaves the gateway’s own errors alone and turns a closed client into shutting_down', () => {
    const own = new ServiceError(429, 'concurrent_stream_limit', 'x', { shape: 'legacy' });
    expect(toLegacyError(own, UPSTREAM_CONTEXTS.create)).toBe(own);
    const closed = toLegacyError(new ServiceError(503, 'upstream_client_closed', 'closed'), UPSTREAM_CONTEXTS.create) as ServiceError;
    expect([closed.status, closed.code]).toEqual([503, 'shutting_down']);
  });
});

describe('legacyResultError', () => {
  it('names the legacy code and status, and the upstream code, never its message', () => {
    expect(legacyResultError(http(503, 'model_unavailable'))).toMatch(/^upstream_unavailable \(503\) \[model_unavailable\]: /);
    expect(legacyResultError(network)).toMatch(/^upstream_unreachable \(502\): /);
    expect(legacyResultError(timeout)).toMatch(/^upstream_timeout \(504\): /);
    for (const e of [http(500), network, timeout, http(429)])
      expect(legacyResultError(e)).not.toMatch(/127\.0\.0\.1|10\.0\.0\.7|ECONNREFUSED|secret/);
  });
});

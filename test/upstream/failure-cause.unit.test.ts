/** `failureCause`: why an upstream call failed, in a few words for a log line. */
import { UpstreamError, failureCause } from '../../src/upstream/client';
import { circuitOpenError } from '../../src/upstream/breaker';
import { httpError } from '../../src/upstream/errors';

const coded = (code: string, message: string) => Object.assign(new Error(message), { code });
const network = (cause: unknown) =>
  new UpstreamError({ kind: 'network', status: 502, message: `Upstream unreachable: ${(cause as Error).message}`, cause });

describe('failureCause', () => {
  test('an answer: its status and the upstream’s code', () => {
    expect(failureCause(httpError(503, { detail: { error: { code: 'model_unavailable', message: 'm' } } }, undefined))).toBe(
      'HTTP 503 model_unavailable',
    );
    expect(failureCause(httpError(500, 'oops', undefined))).toBe('HTTP 500');
  });

  test('no answer: the transport’s code from the causes, with its message', () => {
    expect(failureCause(network(coded('ECONNREFUSED', 'connect ECONNREFUSED 127.0.0.1:9')))).toBe(
      'ECONNREFUSED (connect ECONNREFUSED 127.0.0.1:9)',
    );
    // undici fetch: `fetch failed` holds the system error in `cause`; a dual-stack connect, an AggregateError.
    const fetchFailed = new TypeError('fetch failed', { cause: coded('ENOTFOUND', 'getaddrinfo ENOTFOUND upstream.invalid') });
    expect(failureCause(fetchFailed)).toBe('ENOTFOUND (getaddrinfo ENOTFOUND upstream.invalid)');
    const both = new AggregateError([
      coded('ECONNREFUSED', 'connect ECONNREFUSED ::1:9'),
      coded('ECONNREFUSED', 'connect ECONNREFUSED 127.0.0.1:9'),
    ]);
    expect(failureCause(network(both))).toBe('ECONNREFUSED (connect ECONNREFUSED ::1:9)');
    expect(failureCause(network(coded('UND_ERR_CONNECT_TIMEOUT', 'Connect Timeout Error')))).toBe(
      'UND_ERR_CONNECT_TIMEOUT (Connect Timeout Error)',
    );
  });

  test('the circuit breaker, and anything else: its code or message', () => {
    expect(failureCause(circuitOpenError(1000))).toBe('circuit open (upstream_circuit_open)');
    expect(failureCause(new Error('strange'))).toBe('strange');
    expect(failureCause('a string')).toBe('a string');
  });
});

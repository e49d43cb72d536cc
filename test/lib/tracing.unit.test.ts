/**
 * The tracing switch (the standard OpenTelemetry environment → on, off, or a refused boot) and
 * what works with tracing off: no span is ever started, and W3C trace context still travels (the
 * caller's trace id parsed for the logs, a child traceparent for upstream calls).
 */
import { trace } from '@opentelemetry/api';
import {
  activeSpanContext,
  childTraceparent,
  inSpan,
  inSpanSync,
  linkTo,
  newTraceId,
  requestTraceId,
  startSpan,
  traceIdOf,
  tracingOn,
} from '../../src/lib/spans';
import { TracingConfigError, startTracing, tracingSettings } from '../../src/lib/tracing';
import { createLogger } from '../../src/lib/logger';

describe('tracingSettings', () => {
  const E = 'http://collector:4318';
  test.each([
    [{}, { enabled: false, why: expect.stringMatching(/no OTEL_EXPORTER_OTLP_ENDPOINT/) }],
    [
      { OTEL_EXPORTER_OTLP_ENDPOINT: E },
      { enabled: true, protocol: 'http/protobuf', endpoint: `${E}/v1/traces`, sampler: 'parentbased_always_on' },
    ],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: `${E}/` }, { enabled: true, endpoint: `${E}/v1/traces` }],
    [{ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${E}/custom/path` }, { enabled: true, endpoint: `${E}/custom/path` }],
    [
      { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://a:4318', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${E}/t` },
      { enabled: true, endpoint: `${E}/t` },
    ],
    [
      { OTEL_EXPORTER_OTLP_ENDPOINT: E, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' },
      { enabled: true, protocol: 'http/json' },
    ],
    [
      { OTEL_EXPORTER_OTLP_ENDPOINT: E, OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc', OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json' },
      { enabled: true, protocol: 'http/json' },
    ],
    [
      { OTEL_EXPORTER_OTLP_ENDPOINT: E, OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.01' },
      { enabled: true, sampler: 'parentbased_traceidratio 0.01' },
    ],
    [
      { OTEL_EXPORTER_OTLP_ENDPOINT: E, OTEL_SDK_DISABLED: 'true' },
      { enabled: false, why: 'OTEL_SDK_DISABLED=true' },
    ],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: E, OTEL_SDK_DISABLED: 'false' }, { enabled: true }],
    [
      { OTEL_EXPORTER_OTLP_ENDPOINT: E, OTEL_TRACES_EXPORTER: 'none' },
      { enabled: false, why: 'OTEL_TRACES_EXPORTER=none' },
    ],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://user:secret@collector:4318' }, { enabled: true, endpoint: 'http://collector:4318/v1/traces' }],
  ])('%j → %j', (env, expected) => {
    expect(tracingSettings(env)).toMatchObject(expected);
  });

  test.each([
    [
      { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' },
      /OTEL_EXPORTER_OTLP_PROTOCOL=grpc is not supported: http\/protobuf or http\/json/,
    ],
    [
      { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://c:4318', OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/xml' },
      /OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http\/xml/,
    ],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' }, /OTEL_EXPORTER_OTLP_ENDPOINT must be an http\(s\) URL/],
    [{ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'not a url' }, /OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is not a URL/],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_TRACES_SAMPLER: 'sometimes' }, /OTEL_TRACES_SAMPLER=sometimes/],
    [
      { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '5' },
      /OTEL_TRACES_SAMPLER_ARG must be a ratio from 0 to 1/,
    ],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_TRACES_EXPORTER: 'zipkin' }, /OTEL_TRACES_EXPORTER=zipkin is not supported/],
  ])('%j is refused', (env, message) => {
    expect(() => tracingSettings(env)).toThrow(TracingConfigError);
    expect(() => tracingSettings(env)).toThrow(message);
  });
});

describe('tracing off', () => {
  test('startTracing does nothing; the span helpers run their work without a span', async () => {
    const off = await startTracing({ enabled: false, why: 'test' }, { serviceName: 's', replicaId: 'r', logger: createLogger('silent') });
    expect(off.enabled).toBe(false);
    expect(tracingOn()).toBe(false);
    expect(await inSpan('x', {}, async (span) => span)).toBeUndefined();
    expect(inSpanSync('x', {}, (span) => span)).toBeUndefined();
    expect(startSpan('x', {})).toBeUndefined();
    expect(activeSpanContext()).toBeUndefined();
    // No SDK was registered: the API's tracer is the no-op one.
    expect(trace.getTracer('t').startSpan('s').isRecording()).toBe(false);
    await off.shutdown();
  });

  test("the caller's trace id is read from a valid W3C traceparent only", () => {
    const id = '4bf92f3577b34da6a3ce929d0e0e4736';
    expect(traceIdOf(`00-${id}-00f067aa0ba902b7-01`)).toBe(id);
    expect(requestTraceId(`00-${id}-00f067aa0ba902b7-00`)).toBe(id);
    expect(requestTraceId([`00-${id}-00f067aa0ba902b7-01`, 'x'])).toBe(id);
    // A future version is read as far as version 00 defines it.
    expect(traceIdOf(`01-${id}-00f067aa0ba902b7-01-extra`)).toBe(id);
    for (const bad of [
      undefined,
      '',
      'garbage',
      `00-${'0'.repeat(32)}-00f067aa0ba902b7-01`,
      `00-${id}-${'0'.repeat(16)}-01`,
      `ff-${id}-00f067aa0ba902b7-01`,
      `00-${id}-00f067aa0ba902b7-01-extra`,
      `00-${id.toUpperCase()}-00f067aa0ba902b7-01`,
    ]) {
      expect([bad, traceIdOf(bad)]).toEqual([bad, undefined]);
    }
  });

  test('an upstream call gets a child traceparent in the trace: a new span id each time, sampled', () => {
    const id = newTraceId();
    expect(id).toMatch(/^[0-9a-f]{32}$/);
    const a = childTraceparent(id);
    const b = childTraceparent(id);
    expect(a).toMatch(new RegExp(`^00-${id}-[0-9a-f]{16}-01$`));
    expect(a).not.toBe(b);
    expect(traceIdOf(a)).toBe(id);
  });

  test("a stream's later spans link to its create only when the create was traced", () => {
    expect(linkTo(undefined)).toEqual([]);
    expect(linkTo({ traceId: 'a'.repeat(32) })).toEqual([]);
    expect(linkTo({ traceId: 'a'.repeat(32), spanId: 'b'.repeat(16) })).toEqual([
      { context: expect.objectContaining({ traceId: 'a'.repeat(32), spanId: 'b'.repeat(16), isRemote: true }) },
    ]);
    expect(linkTo({ traceId: '0'.repeat(32), spanId: 'b'.repeat(16) })).toEqual([]);
  });
});

/**
 * OpenTelemetry tracing of a process (`serve`, `emulator`), off unless the standard environment
 * configures it (docs/operations.md "Tracing"). `tracingSettings` reads the environment (pure);
 * `startTracing` loads the SDK, the OTLP exporter and the instrumentations only when it is on, and
 * must run before the instrumented modules (express, ioredis) are first required: src/main.ts
 * calls it before it imports the gateway. With tracing off nothing here is loaded but this file,
 * and ./spans.ts answers every call with a no-op.
 *
 * Environment: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (used as is) or `OTEL_EXPORTER_OTLP_ENDPOINT`
 * (+ `/v1/traces`) turns it on; `OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL` `http/protobuf` (default) or
 * `http/json`; `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`; `OTEL_TRACES_SAMPLER` /
 * `OTEL_TRACES_SAMPLER_ARG`; `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none` turn it off.
 * The exporter reads its own `OTEL_EXPORTER_OTLP_[TRACES_]HEADERS` / `_TIMEOUT`, the batch
 * processor `OTEL_BSP_*`. An unsupported protocol, exporter or sampler stops the boot (exit 2).
 *
 * What is never recorded: headers (Authorization included: no instrumentation is given a header
 * list), query values (`?access_token=` of room URLs, any `?key=`: `url.query` and `url.full` keep
 * parameter names only, as the logs do), Redis arguments (the command name only).
 */
import type { Context } from '@opentelemetry/api';
import type { ReadableSpan, Span, SpanProcessor } from '@opentelemetry/sdk-trace-base';
import type { Logger } from './logger';
import { redactQuery } from './redact-query';
import { ATTR, markTracingOn } from './spans';

export type TraceProtocol = 'http/protobuf' | 'http/json';

export type TracingSettings =
  { enabled: false; why: string } | { enabled: true; protocol: TraceProtocol; endpoint: string; sampler: string };

/** A tracing variable the gateway cannot honour: the boot stops with this message (exit 2). */
export class TracingConfigError extends Error {
  override name = 'TracingConfigError';
}

const SAMPLERS = new Set([
  'always_on',
  'always_off',
  'traceidratio',
  'parentbased_always_on',
  'parentbased_always_off',
  'parentbased_traceidratio',
]);

const value = (env: NodeJS.ProcessEnv, name: string): string | undefined => {
  const v = env[name]?.trim();
  return v ? v : undefined;
};

/** Whether tracing is on, and how, from the standard OpenTelemetry environment. Throws `TracingConfigError` on values it cannot honour. */
export function tracingSettings(env: NodeJS.ProcessEnv = process.env): TracingSettings {
  if (value(env, 'OTEL_SDK_DISABLED')?.toLowerCase() === 'true') return { enabled: false, why: 'OTEL_SDK_DISABLED=true' };
  const exporter = value(env, 'OTEL_TRACES_EXPORTER')?.toLowerCase() ?? 'otlp';
  if (exporter === 'none') return { enabled: false, why: 'OTEL_TRACES_EXPORTER=none' };
  if (exporter !== 'otlp') throw new TracingConfigError(`OTEL_TRACES_EXPORTER=${exporter} is not supported: otlp or none`);
  const tracesEndpoint = value(env, 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT');
  const baseEndpoint = value(env, 'OTEL_EXPORTER_OTLP_ENDPOINT');
  if (!tracesEndpoint && !baseEndpoint)
    return { enabled: false, why: 'no OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT' };
  const endpoint = tracesEndpoint ?? `${baseEndpoint!.replace(/\/+$/, '')}/v1/traces`;
  const name = tracesEndpoint ? 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT' : 'OTEL_EXPORTER_OTLP_ENDPOINT';
  let url: URL;
  try {
    url = new URL(endpoint);
  } catch {
    throw new TracingConfigError(`${name} is not a URL`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new TracingConfigError(`${name} must be an http(s) URL, got ${url.protocol}`);
  const protocolName = value(env, 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL')
    ? 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL'
    : 'OTEL_EXPORTER_OTLP_PROTOCOL';
  const protocol = value(env, protocolName) ?? 'http/protobuf';
  if (protocol !== 'http/protobuf' && protocol !== 'http/json') {
    throw new TracingConfigError(`${protocolName}=${protocol} is not supported: http/protobuf or http/json`);
  }
  const sampler = value(env, 'OTEL_TRACES_SAMPLER')?.toLowerCase() ?? 'parentbased_always_on';
  if (!SAMPLERS.has(sampler)) throw new TracingConfigError(`OTEL_TRACES_SAMPLER=${sampler} is not supported: ${[...SAMPLERS].join(', ')}`);
  const arg = value(env, 'OTEL_TRACES_SAMPLER_ARG');
  if (arg !== undefined && sampler.endsWith('traceidratio')) {
    const ratio = Number(arg);
    if (!(ratio >= 0 && ratio <= 1))
      throw new TracingConfigError(`OTEL_TRACES_SAMPLER_ARG must be a ratio from 0 to 1, got ${JSON.stringify(arg)}`);
  }
  // The endpoint as it may be logged: no credentials, no query.
  const shown = `${url.origin}${url.pathname}`;
  return { enabled: true, protocol, endpoint: shown, sampler: sampler.endsWith('traceidratio') ? `${sampler} ${arg ?? '1'}` : sampler };
}

export interface Tracing {
  readonly enabled: boolean;
  /** Exports what is left (bounded by the exporter's timeout) and stops recording. */
  shutdown(): Promise<void>;
}

export interface TracingOptions {
  /** `service.name` unless `OTEL_SERVICE_NAME` or `OTEL_RESOURCE_ATTRIBUTES` name one. */
  serviceName: string;
  /** This replica's id (`store.gatewayId`): `service.instance.id` and every span's `gateway.replica_id`. */
  replicaId: string;
  version?: string;
  /** Where the SDK's own warnings go (an unreachable collector: one line a minute per distinct message). */
  logger: Logger;
}

/** Requests never traced: probes and scrapes (a balancer's every few seconds would be most traces). */
const QUIET = /^\/+(healthz|readyz|metrics)(?:[/?]|$)/;

/**
 * Every span gets this replica's id; a span without a stream id takes its parent's (in this
 * process): an upstream call, a store command or an HTTP child of a stream's span says which stream.
 */
class GatewaySpanProcessor implements SpanProcessor {
  constructor(
    private readonly replicaId: string,
    private readonly getSpan: (ctx: Context) => unknown,
  ) {}

  onStart(span: Span, parent: Context): void {
    span.setAttribute(ATTR.replicaId, this.replicaId);
    if (span.attributes[ATTR.streamId] !== undefined) return;
    const inherited = (this.getSpan(parent) as { attributes?: Record<string, unknown> } | undefined)?.attributes?.[ATTR.streamId];
    if (typeof inherited === 'string') span.setAttribute(ATTR.streamId, inherited);
  }

  onEnd(_span: ReadableSpan): void {}

  forceFlush(): Promise<void> {
    return Promise.resolve();
  }

  shutdown(): Promise<void> {
    return Promise.resolve();
  }
}

/** `url.query` without values (the instrumentations' own redaction knows a few parameter names only). */
function queryAttributes(url: string | undefined): Record<string, string> {
  const redacted = redactQuery(url ?? '/');
  const q = redacted.indexOf('?');
  return q < 0 ? {} : { 'url.query': redacted.slice(q + 1) };
}

/**
 * Starts tracing when `settings` say so: the SDK with the OTLP exporter of the protocol, W3C trace
 * context and baggage as the propagator, AsyncLocalStorage as the context manager, and the http,
 * express, undici and ioredis instrumentations; then ./spans.ts records. Off: a no-op handle.
 */
export async function startTracing(settings: TracingSettings, opts: TracingOptions): Promise<Tracing> {
  if (!settings.enabled) return { enabled: false, shutdown: async () => {} };
  const [
    api,
    { NodeTracerProvider, BatchSpanProcessor },
    resources,
    { registerInstrumentations },
    { HttpInstrumentation },
    express,
    { UndiciInstrumentation },
    { IORedisInstrumentation },
  ] = await Promise.all([
    import('@opentelemetry/api'),
    import('@opentelemetry/sdk-trace-node'),
    import('@opentelemetry/resources'),
    import('@opentelemetry/instrumentation'),
    import('@opentelemetry/instrumentation-http'),
    import('@opentelemetry/instrumentation-express'),
    import('@opentelemetry/instrumentation-undici'),
    import('@opentelemetry/instrumentation-ioredis'),
  ]);
  api.diag.setLogger(diagToLog(opts.logger.child({ component: 'tracing' })), api.DiagLogLevel.WARN);

  const exporter =
    settings.protocol === 'http/json'
      ? new (await import('@opentelemetry/exporter-trace-otlp-http')).OTLPTraceExporter()
      : new (await import('@opentelemetry/exporter-trace-otlp-proto')).OTLPTraceExporter();
  // The environment's resource (OTEL_RESOURCE_ATTRIBUTES, OTEL_SERVICE_NAME) over the gateway's defaults.
  const resource = resources
    .resourceFromAttributes({
      'service.name': opts.serviceName,
      'service.instance.id': opts.replicaId,
      ...(opts.version ? { 'service.version': opts.version } : {}),
    })
    .merge(resources.detectResources({ detectors: [resources.envDetector] }));
  const provider = new NodeTracerProvider({
    resource,
    spanProcessors: [new GatewaySpanProcessor(opts.replicaId, (ctx) => api.trace.getSpan(ctx)), new BatchSpanProcessor(exporter)],
  });
  provider.register();
  const unregister = registerInstrumentations({
    tracerProvider: provider,
    instrumentations: [
      new HttpInstrumentation({
        ignoreIncomingRequestHook: (req) => QUIET.test(req.url ?? ''),
        // The gateway's only node:http client is the passthrough, which traces its upstream leg itself
        // (keeping its raw header list, which the instrumentation would turn into an object); left
        // unpatched, its requests pay nothing for the instrumentation.
        disableOutgoingRequestInstrumentation: true,
        startIncomingSpanHook: (req) => queryAttributes(req.url),
      }),
      // No span per layer (they would outnumber everything else): it names the server span by its route only.
      new express.ExpressInstrumentation({ ignoreLayersType: Object.values(express.ExpressLayerType) }),
      new UndiciInstrumentation({
        // Calls outside any span (a first-frame poll) carry the stream's traceparent from the client instead.
        requireParentforSpans: true,
        startSpanHook: (req) => ({ 'url.full': redactQuery(`${req.origin}${req.path}`), ...queryAttributes(req.path) }),
      }),
      new IORedisInstrumentation({ requireParentSpan: true, dbStatementSerializer: (command) => command }),
    ],
  });
  markTracingOn();
  let stopped: Promise<void> | undefined;
  return {
    enabled: true,
    shutdown() {
      stopped ??= (async () => {
        markTracingOn(false);
        unregister();
        await provider.shutdown().catch((err: unknown) => opts.logger.warn({ err }, 'tracing shutdown failed'));
      })();
      return stopped;
    },
  };
}

/** The SDK's diagnostics as log lines: warnings and errors only, each distinct message at most once a minute. */
function diagToLog(log: Logger) {
  const last = new Map<string, number>();
  const write =
    (level: 'warn' | 'error') =>
    (message: string, ...args: unknown[]) => {
      const now = Date.now();
      if ((last.get(message) ?? -Infinity) > now - 60_000) return;
      if (last.size > 100) last.clear();
      last.set(message, now);
      const detail = args
        .map((a) => (a instanceof Error ? a.message : typeof a === 'string' ? a : ''))
        .filter(Boolean)
        .join('; ');
      log[level](detail ? { detail } : {}, `opentelemetry: ${message}`);
    };
  const none = () => undefined;
  return { error: write('error'), warn: write('warn'), info: none, debug: none, verbose: none };
}

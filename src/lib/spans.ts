/**
 * The gateway's side of tracing, on the OpenTelemetry API alone: span names' attributes, the
 * helpers that open spans, and W3C trace context for logs and upstream calls when tracing is off.
 *
 * Tracing is on only once ./tracing.ts started the SDK (`markTracingOn`). Until then every helper
 * here returns at its first line (a boolean test): no span, no context lookup, no SDK loaded. With
 * tracing off the trace ids still work for log correlation: the incoming `traceparent` is parsed
 * (W3C, `traceIdOf`) and upstream calls carry the request's or the stream's trace id with a new
 * span id (`childTraceparent`), as the W3C propagator would write them.
 */
import {
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  TraceFlags,
  context,
  defaultTextMapGetter,
  defaultTextMapSetter,
  isSpanContextValid,
  propagation,
  trace,
} from '@opentelemetry/api';
import type { Attributes, Context, Link, Span, SpanContext } from '@opentelemetry/api';

export type { Span };
import { RPCType, W3CTraceContextPropagator, getRPCMetadata } from '@opentelemetry/core';
import { randomHex } from './random-hex';

/**
 * Attribute names. Every span of a legacy stream carries `legacy.stream_id` (set, or inherited
 * from its parent in this process) and every span of a replica `gateway.replica_id` (./tracing.ts
 * sets it on each span); a key appears only as its hash (src/lib/keys.ts), never as itself.
 */
export const ATTR = {
  replicaId: 'gateway.replica_id',
  streamId: 'legacy.stream_id',
  keyHash: 'gateway.key_hash',
  mode: 'legacy.mode',
  transport: 'legacy.transport',
  model: 'legacy.model',
  tick: 'legacy.tick',
  latenessMs: 'legacy.tick.lateness_ms',
  tickOutcome: 'legacy.tick.outcome',
  attempts: 'legacy.tick.attempts',
  resultId: 'legacy.result_id',
  epoch: 'legacy.epoch',
  endReason: 'legacy.end_reason',
  endWon: 'legacy.end.won',
  adoptHow: 'legacy.adopt.how',
  handoverTo: 'legacy.handover.to',
  handoverClaimed: 'legacy.handover.claimed',
  sockets: 'legacy.results.sockets',
  shed: 'legacy.results.shed',
  storeOp: 'gateway.store.op',
  passthroughPrefix: 'gateway.passthrough.prefix',
  passthroughOutcome: 'gateway.passthrough.outcome',
} as const;

let on = false;

/** Whether spans are recorded and exported (./tracing.ts started the SDK). */
export function tracingOn(): boolean {
  return on;
}

/** Called by ./tracing.ts once the SDK is registered (and by its shutdown with false). */
export function markTracingOn(value = true): void {
  on = value;
}

const tracer = () => trace.getTracer('legacy-gateway');

/** The span context active now (tracing on, inside a span), else undefined. */
export function activeSpanContext(): SpanContext | undefined {
  if (!on) return undefined;
  const sc = trace.getSpanContext(context.active());
  return sc && isSpanContextValid(sc) ? sc : undefined;
}

/** The trace id a log line of this request carries: the active span's (tracing on), else the caller's `traceparent`'s. */
export function requestTraceId(traceparent: string | string[] | undefined): string | undefined {
  return activeSpanContext()?.traceId ?? traceIdOf(Array.isArray(traceparent) ? traceparent[0] : traceparent);
}

/** `traceId` and `spanId` of the active span, for every log line written inside one (a pino mixin; tracing on only). */
export function logTraceFields(): Record<string, string> {
  const sc = activeSpanContext();
  return sc ? { traceId: sc.traceId, spanId: sc.spanId } : {};
}

/** The trace and span ids of a stream's create, kept in its record (`ids`): later spans link to it. */
export interface TraceIds {
  traceId: string;
  spanId?: string;
}

/** A link to the span that created a stream (absent when the create was not traced). */
export function linkTo(ids: TraceIds | undefined): Link[] {
  if (!ids?.spanId || !ids.traceId) return [];
  const sc: SpanContext = { traceId: ids.traceId, spanId: ids.spanId, traceFlags: TraceFlags.NONE, isRemote: true };
  return isSpanContextValid(sc) ? [{ context: sc }] : [];
}

export interface SpanOptions {
  attributes?: Attributes;
  /** The stream's create, linked from this span. */
  link?: TraceIds;
  kind?: SpanKind;
  /**
   * Where the span starts: `child` under the active span (none active: a new trace), `root` always
   * a new trace (a tick, a timer's work), `auto` under the active span if any, else a new trace.
   */
  parent?: 'auto' | 'root';
}

/** Marks a span failed with the error's stable code or name (never its message: it may quote input). */
export function failSpan(span: Span, err: unknown): void {
  const code = (err as { code?: unknown } | null)?.code;
  const type = typeof code === 'string' ? code : err instanceof Error ? err.name : 'error';
  span.setAttribute('error.type', type);
  span.setStatus({ code: SpanStatusCode.ERROR, message: type });
}

function start(name: string, opts: SpanOptions): { span: Span; ctx: Context } {
  const active = context.active();
  const parent = opts.parent === 'root' || !trace.getSpan(active) ? ROOT_CONTEXT : active;
  const span = tracer().startSpan(
    name,
    { kind: opts.kind ?? SpanKind.INTERNAL, attributes: opts.attributes, links: linkTo(opts.link) },
    parent,
  );
  return { span, ctx: trace.setSpan(parent === ROOT_CONTEXT ? active : parent, span) };
}

/**
 * Runs `fn` inside a new span (tracing on), ended when `fn` settles and marked failed when it
 * throws; with tracing off `fn` runs as is, given no span.
 */
export async function inSpan<T>(name: string, opts: SpanOptions, fn: (span: Span | undefined) => Promise<T>): Promise<T> {
  if (!on) return fn(undefined);
  const { span, ctx } = start(name, opts);
  return context.with(ctx, async () => {
    try {
      return await fn(span);
    } catch (err) {
      failSpan(span, err);
      throw err;
    } finally {
      span.end();
    }
  });
}

/**
 * `fn` as a child span of the active one when that one is recorded (a sampled request or tick),
 * else `fn` as is: a call made for nobody's trace (a heartbeat, a flush) starts none. A returned
 * promise ends the span when it settles.
 */
export function inChildSpan<T>(name: string, attributes: Attributes, fn: () => T): T {
  if (!on) return fn();
  const active = context.active();
  if (!trace.getSpan(active)?.isRecording()) return fn();
  const span = tracer().startSpan(name, { kind: SpanKind.INTERNAL, attributes }, active);
  let out: T;
  try {
    out = context.with(trace.setSpan(active, span), fn);
  } catch (err) {
    failSpan(span, err);
    span.end();
    throw err;
  }
  if (!(out instanceof Promise)) {
    span.end();
    return out;
  }
  return out.then(
    (v: unknown) => {
      span.end();
      return v;
    },
    (err: unknown) => {
      failSpan(span, err);
      span.end();
      throw err;
    },
  ) as T;
}

/** `inSpan` for synchronous work. */
export function inSpanSync<T>(name: string, opts: SpanOptions, fn: (span: Span | undefined) => T): T {
  if (!on) return fn(undefined);
  const { span, ctx } = start(name, opts);
  return context.with(ctx, () => {
    try {
      return fn(span);
    } catch (err) {
      failSpan(span, err);
      throw err;
    } finally {
      span.end();
    }
  });
}

/** A span started now under the active one (tracing on), ended by the caller; with the context to run its children in. */
export function startSpan(name: string, opts: SpanOptions): { span: Span; ctx: Context } | undefined {
  return on ? start(name, opts) : undefined;
}

/** The headers (`traceparent`, `tracestate`, `baggage`) of a call made in `ctx`, through the registered propagator. */
export function propagationHeaders(ctx: Context): Record<string, string> {
  const carrier: Record<string, string> = {};
  propagation.inject(ctx, carrier, defaultTextMapSetter);
  return carrier;
}

/**
 * Runs `fn` outside any span: timers armed in it (a stream's lease, keepalive, ticker) do not
 * inherit the request's span, so the work they do later starts its own trace (linked to the create).
 */
export function detached<T>(fn: () => T): T {
  return on ? context.with(ROOT_CONTEXT, fn) : fn();
}

/**
 * A client span started now under the active one (tracing on), ended by the caller, and the
 * propagation headers (`traceparent`, …) of the call it stands for.
 */
export function startClientSpan(name: string, attributes: Attributes): { span: Span; headers: Record<string, string> } | undefined {
  if (!on) return undefined;
  const active = context.active();
  const span = tracer().startSpan(name, { kind: SpanKind.CLIENT, attributes }, active);
  return { span, headers: propagationHeaders(trace.setSpan(active, span)) };
}

/** Names the active HTTP server span by its route (`POST /v1beta/chat/completions`) for a request no router saw. */
export function setServerRoute(route: string): void {
  if (!on) return;
  const rpc = getRPCMetadata(context.active());
  if (rpc?.type === RPCType.HTTP) rpc.route = route;
}

/** The active span, when tracing is on. */
export function activeSpan(): Span | undefined {
  return on ? trace.getActiveSpan() : undefined;
}

// ── W3C trace context without tracing: the hand-off of a trace id to logs and to the upstream. ──

const w3c = new W3CTraceContextPropagator();

/** The trace id of a valid W3C `traceparent` (ids not all zero), through the W3C propagator; undefined otherwise. */
export function traceIdOf(traceparent: string | undefined): string | undefined {
  if (!traceparent) return undefined;
  const sc = trace.getSpanContext(w3c.extract(ROOT_CONTEXT, { traceparent }, defaultTextMapGetter));
  return sc && isSpanContextValid(sc) ? sc.traceId : undefined;
}

/** A new trace id (16 random bytes, hex). */
export function newTraceId(): string {
  return randomHex(16);
}

/** The `traceparent` of one call in trace `traceId`: a new span id, sampled flag set (written by the W3C propagator). */
export function childTraceparent(traceId: string): string {
  const carrier: Record<string, string> = {};
  const sc: SpanContext = { traceId, spanId: randomHex(8), traceFlags: TraceFlags.SAMPLED };
  w3c.inject(trace.setSpanContext(ROOT_CONTEXT, sc), carrier, defaultTextMapSetter);
  return carrier.traceparent ?? '';
}

import { performance } from 'node:perf_hooks';
import { ATTR, inChildSpan, tracingOn } from '../../lib/spans';
import type { Store, StoreObserver } from './store';

/** Where a measured store reports each call (the gateway's metrics and StoreHealth). */
export type StoreCallSink = StoreObserver;

/**
 * MeasuredStore: `inner` with every method call timed and every failure counted into `sink`, by
 * method name (never an argument: keys and stream ids stay out of labels). A Proxy rather than a
 * class listing each method, so a method added to Store is measured without touching this file.
 */
export function measuredStore(inner: Store, sink: StoreCallSink): Store {
  /** Wrappers per method, rebuilt if the method was replaced on `inner` (tests fake failures so). */
  const wrappers = new Map<string, { of: unknown; fn: unknown }>();
  return new Proxy(inner, {
    get(target, prop) {
      const value: unknown = Reflect.get(target, prop, target);
      if (typeof prop !== 'string' || typeof value !== 'function') return value;
      const cached = wrappers.get(prop);
      if (cached?.of === value) return cached.fn;
      const fn = measure(prop, value as (...args: unknown[]) => unknown, target, sink);
      wrappers.set(prop, { of: value, fn });
      return fn;
    },
  });
}

/**
 * A call answering a promise is a store command: timed, and counted failed if it rejects. Others (a
 * hook registration) pass through. Under a recorded span (tracing on) the call is its child span
 * `store.<op>` (a tick's commit, a create's slot and record).
 */
function measure(op: string, method: (...args: unknown[]) => unknown, target: Store, sink: StoreCallSink) {
  const name = `store.${op}`;
  const attributes = { [ATTR.storeOp]: op };
  return (...args: unknown[]): unknown => {
    const start = performance.now();
    const out = tracingOn() ? inChildSpan(name, attributes, () => method.apply(target, args)) : method.apply(target, args);
    if (!(out instanceof Promise)) return out;
    return out.then(
      (v: unknown) => {
        sink.call(op, (performance.now() - start) / 1000, false);
        return v;
      },
      (err: unknown) => {
        sink.call(op, (performance.now() - start) / 1000, true);
        throw err;
      },
    );
  };
}

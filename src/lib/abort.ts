/**
 * A signal for a short task under a long-lived one: it aborts when `parent` does (with the parent's
 * reason) or when `abort` is called, and `done` stops it listening to the parent. Unlike
 * `AbortSignal.any([parent, …])`, it leaves nothing behind in the parent: Node 20 keeps an entry in
 * the parent for every signal `any` made from it until the parent aborts, so a stream's signal grew
 * by one entry per tick for the stream's whole life.
 */
export interface ChildAbort {
  readonly signal: AbortSignal;
  abort(reason?: unknown): void;
  /** The task is over: the parent is no longer listened to. */
  done(): void;
}

export function childAbort(parent: AbortSignal): ChildAbort {
  const own = new AbortController();
  if (parent.aborted) {
    own.abort(parent.reason);
    return { signal: own.signal, abort: () => undefined, done: () => undefined };
  }
  const follow = () => own.abort(parent.reason);
  parent.addEventListener('abort', follow, { once: true });
  return {
    signal: own.signal,
    abort: (reason?: unknown) => own.abort(reason),
    done: () => parent.removeEventListener('abort', follow),
  };
}

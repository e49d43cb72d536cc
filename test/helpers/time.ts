/**
 * Real-time waits for tests: the one `sleep`, a poll that waits for an event (`until`), and a bound
 * that turns a hang into a failure (`deadline`).
 */

/**
 * Resolves after `ms` (a time already past: at the next turn, without Node's negative-timeout
 * warning); the timer never holds the process. Never assert on how long it took.
 */
export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, Math.max(0, ms)).unref());

/** Rejects when `p` takes longer than `ms` (a hang is a failure, not a jest timeout). */
export function deadline<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let t: NodeJS.Timeout;
  return Promise.race([
    p.finally(() => clearTimeout(t)),
    new Promise<never>((_, reject) => {
      t = setTimeout(() => reject(new Error(`${what}: still pending after ${ms} ms`)), ms);
    }),
  ]);
}

/** Polls `check` every `everyMs` until it holds (waiting for an event, not a time); bound it with `deadline`. */
export async function until(check: () => boolean | Promise<boolean>, everyMs = 100): Promise<void> {
  while (!(await check())) await sleep(everyMs);
}

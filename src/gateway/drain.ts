/**
 * The drain (`holding`, ./lifecycle.ts), a fleet replica's SIGTERM: `unready` for `shutdownDelayMs`,
 * then the replica holds its connections (./shutdown.ts `holdConnections`) and looks at what it still
 * holds until nothing is left, the deadline passes, or a second signal comes. The close follows.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { ShutdownRun } from './shutdown';

/** How often a holding replica looks at what it still holds, and how often it says so in the log. */
const DRAIN_POLL_MS = 200;
const DRAIN_LOG_MS = 30_000;

/**
 * Returns once nothing is held, at the deadline, or when hurried, with the words the close logs for
 * each stream still here (undefined: nothing was held, no other replica alive to take the streams).
 */
export async function drain(run: ShutdownRun, drainMs: number): Promise<string | undefined> {
  const { gateway, listeners } = run;
  const log = run.logger.child({ component: 'drain' });
  const deadline = Date.now() + drainMs;
  gateway.markUnready();
  await run.serveUnready(Math.min(run.shutdownDelayMs, drainMs / 2), log, 'holding');
  if (!(await gateway.holdConnections()))
    return void log.info('drain skipped: no other replica alive to take the streams (they end when leaving)');
  let nextLogAt = 0;
  for (;;) {
    listeners.closeIdle();
    const { sockets, relays } = gateway.held();
    const now = Date.now();
    const secondsLeft = Math.max(0, Math.ceil((deadline - now) / 1000));
    gateway.metrics.drainState({ draining: true, sockets, relays, secondsLeft });
    const state = { sockets, relays, streams: gateway.streams.activeCount, inFlight: gateway.inFlight, secondsLeft };
    if (sockets + relays + gateway.inFlight === 0) {
      log.info(state, 'drain over: no client connection left');
      return 'drain over';
    }
    if (run.hurry.aborted) {
      log.warn(state, 'drain ended by a second signal: leaving (what is left is handed over or ended)');
      return 'drain ended early';
    }
    if (now >= deadline) {
      log.warn(state, 'drain deadline reached: leaving (what is left is handed over or ended)');
      return 'drain deadline';
    }
    if (now >= nextLogAt) {
      log.info(state, `drain: holding ${sockets} results sockets and ${relays} media relays, ${secondsLeft} s left`);
      nextLogAt = now + DRAIN_LOG_MS;
    }
    await Promise.race([sleep(DRAIN_POLL_MS), run.hurried]);
  }
}

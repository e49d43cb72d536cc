/**
 * One step of a rolling deploy on real processes, shared by the fleet suites and the `rolling` bench: a
 * new replica starts (fleet.ts `addReplica`, a fresh port), joins the load balancer (haproxy.ts)
 * and is counted up, then the old one gets SIGTERM and the balancer is waited on until it counts
 * the old one down (its /readyz answers 503, or it is gone). The old process is not waited for: it
 * may drain for as long as its connections last.
 */
import type { Fleet, Replica } from './fleet';
import type { Balancer } from './haproxy';

export interface ReplicaExit {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** When the exit was seen (this process's clock, ms). */
  atMs: number;
}

export interface ReplacedReplica {
  old: Replica;
  next: Replica;
  /** When SIGTERM was sent (ms). */
  termAtMs: number;
  /** The old process's exit, whenever it comes. */
  exit: Promise<ReplicaExit>;
  /** The exit, once it has been seen. */
  exited(): ReplicaExit | undefined;
}

/** Replaces `oldId` by a new replica `nextId` behind `balancer` (see the file comment). */
export async function replaceReplica(fleet: Fleet, balancer: Balancer, oldId: string, nextId: string): Promise<ReplacedReplica> {
  const old = fleet.replica(oldId);
  const next = await fleet.addReplica(nextId);
  await balancer.addServer({ name: next.id, url: next.url });
  let seen: ReplicaExit | undefined;
  const proc = old.proc;
  const exit = proc.exited.then((e) => (seen = { ...e, atMs: Date.now() }));
  const termAtMs = Date.now();
  old.kill('SIGTERM');
  await balancer.waitFor(old.id, 'DOWN');
  return { old, next, termAtMs, exit, exited: () => seen };
}

/**
 * The replica's shutdown states, in the order it passes them (it never goes back; a state may be
 * skipped). The words mean one thing each, here and in the docs:
 *
 * - `serving`: ready; everything is served.
 * - `unready`: /readyz answers 503 so balancers stop sending new work; everything else is served as
 *   usual (the `shutdownDelayMs` wait).
 * - `holding`: the drain (a fleet replica's SIGTERM, docs/scaling.md "Deploys"): creates are
 *   refused, every response closes its connection, and results sockets, media relays and requests
 *   in flight are kept serving until they end.
 * - `leaving`: the replica's streams are handed over (fleet) or ended; new results sockets are refused.
 * - `closed`: the gateway's resources are released.
 *
 * `Lifecycle` is the one owner of the state; the HTTP handler, /readyz, the upgrade path and the
 * fleet (../fleet) ask it.
 */

const REPLICA_STATES = ['serving', 'unready', 'holding', 'leaving', 'closed'] as const;
export type ReplicaState = (typeof REPLICA_STATES)[number];

/** What the rest of the gateway may ask of the lifecycle (the gateway alone moves it). */
export interface LifecycleView {
  readonly state: ReplicaState;
  /** /readyz may answer 200 (the store decides the rest). */
  readonly ready: boolean;
  /** In the drain (`holding`): /readyz says `draining: true`; not before it (`unready`) nor after it (`leaving`). */
  readonly draining: boolean;
  /** Connections may stay open after their response (else `Connection: close`, so the next call goes elsewhere). */
  readonly keepAlive: boolean;
  /** New results sockets may attach (else the upgrade answers 503). */
  readonly acceptsUpgrades: boolean;
  /**
   * Streams may come here: before the drain (`holding`). From it on, the replica is nobody's
   * hand-over or failover target and hands on what can move.
   */
  readonly takesStreams: boolean;
  /** Streams may still start here (a create in flight, an adoption): before `leaving`, when they end or move. */
  readonly startsStreams: boolean;
}

export class Lifecycle implements LifecycleView {
  private current: ReplicaState = 'serving';

  get state(): ReplicaState {
    return this.current;
  }

  /** Moves on to `next`; a state already passed is never entered again. True if it moved. */
  advance(next: ReplicaState): boolean {
    if (this.reached(next)) return false;
    this.current = next;
    return true;
  }

  /** `state` is the current one or behind it. */
  private reached(state: ReplicaState): boolean {
    return REPLICA_STATES.indexOf(this.current) >= REPLICA_STATES.indexOf(state);
  }

  get ready(): boolean {
    return this.current === 'serving';
  }

  get draining(): boolean {
    return this.current === 'holding';
  }

  get keepAlive(): boolean {
    return !this.reached('holding');
  }

  get startsStreams(): boolean {
    return !this.reached('leaving');
  }

  get acceptsUpgrades(): boolean {
    return !this.reached('leaving');
  }

  get takesStreams(): boolean {
    return !this.reached('holding');
  }
}

/**
 * This replica's part in a fleet, as the gateway drives it: `Fleet` (./fleet.ts) when a
 * `store.secret` makes it a member, `SoloFleet` otherwise. Also the link the streams talk to the
 * fleet through (legacy's `FleetLink`): the control channel, or nobody.
 */
import type { StoreConfig } from '../../config';
import { Sealer } from '../../lib/seal';
import type { FleetLink } from '../legacy';
import type { Broker } from '../store/store';
import { controlChannel, encodeControl } from './control';
import { Fleet } from './fleet';
import type { FleetOptions } from './fleet';

export interface FleetMember {
  /** Not part of a fleet: nobody can take this replica's streams, so a SIGTERM has no drain. */
  readonly solo: boolean;
  /** Cannot reach the upstream while another replica can: the balancer should route elsewhere (/readyz 503). */
  readonly yieldsToPeers: boolean;
  /** Joins (heartbeat, control channel, loops); resolves at once for a solo replica. */
  start(): Promise<void>;
  /**
   * Begins the drain (the gateway's lifecycle is `holding`): this replica is marked draining, then
   * its movable streams go to replicas not draining. False when nobody could take them (solo, or
   * the last replica alive): the replica goes on to leaving.
   */
  beginDrain(): Promise<boolean>;
  /** Hands every stream here to replicas not draining and leaves; false when there is none (they end here). */
  handOver(why?: string): Promise<boolean>;
  /** Stops the loops (shutdown). */
  stop(): Promise<void>;
}

/** The replica id of a gateway that is not part of a fleet (memory store, no secret). */
export const SOLO_REPLICA = 'solo';

/** A solo replica's link: its records name `solo`, nothing is sealed, and there is nobody to tell. */
export const SOLO_LINK: FleetLink = { replicaId: SOLO_REPLICA, tell: () => Promise.resolve() };

/** The fleet of a gateway that is not part of one: nothing to join, nobody to hand streams to. */
export class SoloFleet implements FleetMember {
  readonly solo = true;
  readonly yieldsToPeers = false;

  start(): Promise<void> {
    return Promise.resolve();
  }

  beginDrain(): Promise<boolean> {
    return Promise.resolve(false);
  }

  handOver(): Promise<boolean> {
    return Promise.resolve(false);
  }

  stop(): Promise<void> {
    return Promise.resolve();
  }
}

/**
 * The link of this replica's streams. A fleet member's (a `store.secret` is set): control messages
 * over the store, keys sealed into the records so another replica can act for a stream. Else solo.
 */
export function streamsLink(cfg: Pick<StoreConfig, 'secret' | 'gatewayId'>, store: Pick<Broker, 'publish'>): FleetLink {
  if (!cfg.secret) return SOLO_LINK;
  return {
    replicaId: cfg.gatewayId,
    sealer: new Sealer(cfg.secret),
    tell: (replica, msg) => store.publish(controlChannel(replica), encodeControl(msg), replica),
  };
}

/** This replica's part in a fleet: a member of the fleet sharing its store when `store.secret` is set, else solo. */
export function fleetMember(cfg: StoreConfig, opts: Omit<FleetOptions, 'replicaId' | 'cfg'>): FleetMember {
  return cfg.secret ? new Fleet({ ...opts, replicaId: cfg.gatewayId, cfg: cfg.fleet }) : new SoloFleet();
}

/**
 * The ports of legacy sessions: what LegacySessions needs from the rest of the gateway (deps, media,
 * observers) and the in-process state of one live stream, shared by lifecycle and inference.
 */
import type { Brand } from '../../../brand';
import type { LegacyConfig } from '../../../config';
import type { Logger } from '../../../lib/logger';
import type { Sealer } from '../../../lib/seal';
import type { Clock } from '../../../lib/timers';
import type { UpstreamClient } from '../../../upstream/client';
import type { StoreHealth } from '../../store/outage';
import type { Broker, SessionRecord, SessionRecords, Slots } from '../../store/store';
import type { ResultWindows } from '../../store/result-windows';
import type { UpstreamCatalog } from './catalog';
import type { LegacyMedia } from '../contract/responses';
import type { SessionSpec } from '../contract/spec';

/** What the gateway observes of legacy sessions (metrics, deprecation telemetry). All optional. */
export interface LegacyObserver {
  streamCreated?(keyHash: string, spec: SessionSpec): void;
  streamEnded?(keyHash: string, reason: string): void;
  inference?(e: {
    keyHash: string;
    model: string;
    ok: boolean;
    tokens: number;
    inferenceMs: number;
    totalMs: number;
    overheadMs: number;
  }): void;
  tickSkipped?(streamId: string): void;
  /** A tick met an upstream 429 (`event: 'limited'`), or was skipped while its key was held back. */
  rateLimited?(event: 'limited' | 'tick_skipped'): void;
  tickLateness?(ms: number): void;
  upstreamError?(status: number): void;
  /** A tick reached the upstream (any answer below 500) or did not (no answer, a timeout, a 5xx, an open circuit). */
  upstreamReach?(reached: boolean): void;
  /** Fleet (Redis store): replicas alive as this replica last saw them. */
  fleetReplicas?(alive: number): void;
  /** Fleet: sessions this replica schedules now. */
  ownedSessions?(count: number): void;
  /** Fleet: this replica took over a session from a dead or draining replica (`how`). */
  sessionAdopted?(streamId: string, how: 'failover' | 'handover'): void;
  /** Fleet: a tick's result was refused by the store (another owner/epoch, a duplicate, ended). */
  tickFenced?(reason: 'fenced' | 'duplicate' | 'ended' | 'missing'): void;
}

/** One observer that hands every event to each of `observers`, in order (absent ones skipped). */
export function fanOut(observers: ReadonlyArray<LegacyObserver | undefined>): LegacyObserver {
  const list = observers.filter((o): o is LegacyObserver => o !== undefined);
  const each =
    <K extends keyof LegacyObserver>(k: K) =>
    (...args: Parameters<NonNullable<LegacyObserver[K]>>): void => {
      for (const o of list) (o[k] as ((...a: typeof args) => void) | undefined)?.(...args);
    };
  return {
    streamCreated: each('streamCreated'),
    streamEnded: each('streamEnded'),
    inference: each('inference'),
    tickSkipped: each('tickSkipped'),
    rateLimited: each('rateLimited'),
    tickLateness: each('tickLateness'),
    upstreamError: each('upstreamError'),
    upstreamReach: each('upstreamReach'),
    fleetReplicas: each('fleetReplicas'),
    ownedSessions: each('ownedSessions'),
    sessionAdopted: each('sessionAdopted'),
    tickFenced: each('tickFenced'),
  };
}

export interface RelayStart {
  spec: SessionSpec;
  streamId: string;
  publishUrl: string;
  publishToken: string;
  onLost: () => void;
  onFrameSize?: (width: number, height: number) => void;
}

/** The media side of a stream (webrtc / customer room relays); native streams have none. */
export interface MediaRelay {
  /** Rejects a source that cannot work (bad SDP, codec, room token) before anything is created. */
  check?(spec: SessionSpec): void;
  /**
   * Starts relaying; resolves with what the create response needs. `onLost` ends the stream;
   * `onFrameSize` is told the size of the first relayed frame and of every change.
   */
  start(input: RelayStart): Promise<LegacyMedia>;
  /** Hands a renewed upstream publish token to a running relay. */
  renewToken?(streamId: string, token: string): void;
  stop(streamId: string): Promise<void> | void;
  /** Relays running in this process (a draining replica waits for them to end). */
  readonly activeCount?: number;
}

/** How a drain hands streams over (`StreamMoves.handOver`). */
export interface HandOverOptions {
  /** Pinned streams (and any without a target) stay and run here: a connection drain. */
  keepPinned?: boolean;
  /** Why, when it is worth a log line per stream (`drain deadline`). */
  why?: string;
}

/**
 * What a replica tells a session's owner (docs/scaling.md "Control channel"): `ended` (stop the
 * local scheduler, someone else ended it), `prompt` (re-read it), `adopt` (a drain handed it over).
 */
export type OwnerMessage = { op: 'ended'; streamId: string; reason: string } | { op: 'prompt' | 'adopt'; streamId: string };

/** This replica's place in a fleet sharing one store (src/gateway/fleet). */
export interface FleetLink {
  /** Replica id (`store.gatewayId`): the owner written into the records this replica schedules. */
  replicaId: string;
  /** Seals the client's key into the record so another replica can act for the stream (absent: not shared). */
  sealer?: Sealer;
  /** Sends `msg` to `replica` on its control channel. */
  tell(replica: string, msg: OwnerMessage): Promise<void>;
}

export interface SessionDeps {
  cfg: LegacyConfig;
  brand: Brand;
  logger: Logger;
  /** Slots, session records, the results channel (an end is published there), result windows (reinfer). */
  store: Slots & SessionRecords & Broker & ResultWindows;
  upstream: UpstreamClient;
  catalog: UpstreamCatalog;
  media?: MediaRelay;
  observer?: LegacyObserver;
  /** Time and timers of leases, keepalives, first-frame polls and ticks (default: the real clock). */
  clock?: Clock;
  /** Store outages seen by this replica (../store/outage.ts): when a lapsed lease may end. */
  storeHealth?: Pick<StoreHealth, 'leaseDeadline'>;
  /** How the sessions reach the rest of the fleet (a replica alone has a solo link: ../../fleet/member.ts). */
  fleet: FleetLink;
}

/** A session record as the legacy adapter writes it: its `spec` is a `SessionSpec`. */
export type LegacyRecord = SessionRecord<SessionSpec>;

/**
 * The deps as every part of sessions sees them: the clock resolved (the real one unless injected)
 * and this replica's id (the owner in the records it writes).
 */
export type SessionContext = SessionDeps & { clock: Clock; replicaId: string };

export interface CreateInput {
  apiKey: string;
  accountId: string;
  spec: SessionSpec;
  /** Aborts when the client gave up: a stream created after that is deleted, not handed out. */
  signal?: AbortSignal;
  requestId?: string;
  traceId?: string;
}

export interface CreateOutput {
  streamId: string;
  ttlSeconds: number;
  media: LegacyMedia;
}

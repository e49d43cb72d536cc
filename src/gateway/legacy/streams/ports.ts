/**
 * The ports of legacy streams: what LegacyStreams needs from the rest of the gateway (deps, media
 * sources and relay, observers, the fleet link), what replicas tell each other about a stream, and a
 * create's input and output. A live stream's own state is ./live-stream.ts.
 */
import type { Brand } from '../../../brand';
import type { LegacyConfig } from '../../../config';
import type { Logger } from '../../../lib/logger';
import type { Sealer } from '../../../lib/seal';
import type { Clock } from '../../../lib/timers';
import type { UpstreamClient } from '../../../upstream/client';
import type { StoreHealth } from '../../store/outage';
import type { Broker, StreamRecord, StreamRecords, Slots, StoredMediaSession } from '../../store/store';
import type { ResultWindows } from '../../store/result-windows';
import type { UpstreamCatalog } from './catalog';
import type { LegacyMedia } from '../contract/responses';
import type { StreamSpec, Transport } from '../contract/spec';

/** What the gateway observes of legacy streams (metrics, deprecation telemetry). All optional. */
export interface LegacyObserver {
  streamCreated?(keyHash: string, spec: StreamSpec): void;
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
  /** `count` ticks of a stream ran no inference, for `reason` (./ticker.ts `SkipReason`, or a self-fenced replica). */
  tickSkipped?(streamId: string, reason: 'in_flight_limit' | 'late' | 'self_fenced', count?: number): void;
  /** A tick met an upstream 429 (`event: 'limited'`), or was skipped while its key was held back. */
  rateLimited?(event: 'limited' | 'tick_skipped'): void;
  tickLateness?(ms: number): void;
  upstreamError?(status: number): void;
  /** A tick reached the upstream (any answer below 500) or did not (no answer, a timeout, a 5xx, an open circuit). */
  upstreamReach?(reached: boolean): void;
  /** Fleet: replicas alive as this replica last saw them. */
  fleetReplicas?(alive: number): void;
  /** Fleet: streams this replica schedules now. */
  ownedStreamCount?(count: number): void;
  /** Fleet: this replica took over a stream, from a dead replica (`failover`) or handed over to it (`handover`). */
  streamAdopted?(streamId: string, how: 'failover' | 'handover'): void;
  /** Fleet: a tick's result was refused by the store (another owner/epoch, a duplicate, ended). */
  tickFenced?(reason: 'fenced' | 'duplicate' | 'ended' | 'missing'): void;
}

export interface RelayStart {
  spec: StreamSpec;
  streamId: string;
  publishUrl: string;
  publishToken: string;
  onLost: () => void;
  onFrameSize?: (width: number, height: number) => void;
}

/**
 * The gateway's media relay (webrtc in relay mode, customer rooms): it receives the client's video
 * and publishes it into the upstream's room (src/gateway/ingest/relay.ts), by default in a
 * supervised child process, the media worker (src/gateway/ingest/worker-relay.ts). The sources that
 * relay (`StreamSource`) run on it.
 */
export interface MediaRelay {
  /** Rejects a source that cannot work (bad SDP, codec, room token) before anything is created. */
  check?(spec: StreamSpec): void;
  /**
   * Starts relaying; resolves with what the create response needs. `onLost` ends the stream;
   * `onFrameSize` is told the size of the first relayed frame and of every change.
   */
  start(input: RelayStart): Promise<LegacyMedia>;
  /** Hands a renewed upstream publish token to a running relay. */
  renewToken?(streamId: string, token: string): void;
  stop(streamId: string): Promise<void> | void;
  /** Relays running for this replica (a draining replica waits for them to end). */
  readonly activeCount?: number;
}

/** Media of a stream that lives outside the gateway and outlives its owner: a WHIP session in the upstream's room. */
export type MediaSessionRef = Omit<StoredMediaSession, 'token'>;

/** What a source is given to set a stream's media up (create) or take it over (adoption). */
export interface SourceContext {
  spec: StreamSpec;
  streamId: string;
  /** The media is lost for good: the stream ends (`webrtc_disconnected`, `<vendor>_disconnected`). */
  onLost(): void;
  /** The size of the first relayed frame, and of every change. */
  onFrameSize?(width: number, height: number): void;
  /** The upstream room's publish URL and a current publish token (create: the create's; adoption: an upstream keepalive's). */
  publish(): Promise<{ url: string; token: string }>;
  /** Reads the upstream stream's state and frame fields (with the stream's key; aborted when it stops here). */
  readUpstream(): Promise<{ state: string; last_frame_index: number | null }>;
}

/** A started source: the create response's media part, and its session when the media lives outside this process. */
export interface SourceStarted {
  media: LegacyMedia;
  session?: MediaSessionRef;
}

/**
 * One kind of media source of a legacy stream (native, webrtc over WHIP, webrtc relay, customer
 * room) behind one interface, so the streams never branch on the transport (src/gateway/ingest).
 */
export interface StreamSource {
  /** The stream's media survives its owner (failover, hand-over); false: pinned, it ends with its owner. */
  readonly movable: boolean;
  /** The 422 a create with this source gets, thrown before anything is set up. */
  check(spec: StreamSpec): void;
  /** Sets a new stream's media up (throws legacy errors: the create fails and leaves nothing). */
  start(ctx: SourceContext): Promise<SourceStarted>;
  /** Takes a stream's media over on its new owner (throws: the stream ends as its media lost). */
  adopt(ctx: SourceContext): Promise<void>;
  /** A fresh publish token from an upstream keepalive. */
  renewToken(streamId: string, token: string): void;
  /** Stops what runs here for the stream: it ended here or left this replica. Idempotent. */
  stop(streamId: string): Promise<void> | void;
  /** The stream ended (on whichever replica ended it): ends its media session outside this process, best effort. */
  release(session: MediaSessionRef, publishToken: string, streamId: string): Promise<void>;
}

/** The sources of this gateway, by transport (src/gateway/ingest/sources.ts). */
export interface StreamSources {
  of(transport: Transport): StreamSource;
  /** Media connections held by this replica that cannot move (a draining replica keeps them until they end). */
  readonly held: number;
  /** Stops every source's work here (shutdown). */
  close(): Promise<void>;
}

/** How streams are handed over (`StreamMoves.handOver`): by the drain, an impaired replica yielding, or the hand-over on the way out. */
export interface HandOverOptions {
  /** Pinned streams (and any without a target) stay and run here: the drain, or an impaired replica yielding. */
  keepPinned?: boolean;
  /** Why, when it is worth a log line per stream (the hand-over after a drain: `drain deadline`). */
  why?: string;
}

/**
 * What a replica tells a stream's owner (docs/scaling.md "Control channel"): `ended` (stop the
 * local scheduler, someone else ended it), `prompt` (re-read it), `adopt` (it was handed over to
 * the replica told).
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

export interface StreamsDeps {
  cfg: LegacyConfig;
  brand: Brand;
  logger: Logger;
  /** Slots, stream records, the results channel (an end is published there), result windows (reinfer). */
  store: Slots & StreamRecords & Broker & ResultWindows;
  upstream: UpstreamClient;
  catalog: UpstreamCatalog;
  /** The media sources by transport (default: native only; src/gateway/ingest builds the gateway's). */
  sources?: StreamSources;
  observer?: LegacyObserver;
  /** Time and timers of leases, keepalives, first-frame polls and ticks (default: the real clock). */
  clock?: Clock;
  /** Store outages seen by this replica (../store/outage.ts): when a lapsed lease may end. */
  storeHealth?: Pick<StoreHealth, 'leaseDeadline'>;
  /** How the streams reach the rest of the fleet (a replica alone has a solo link: ../../fleet/member.ts). */
  fleet: FleetLink;
  /** Where the replica is on its way out (../../lifecycle.ts `LifecycleView` is one): creates and starts ask it. */
  lifecycle: StreamsLifecycle;
}

/** What the streams ask of the replica's lifecycle. */
export interface StreamsLifecycle {
  /** Creates are taken: before the drain (`holding`). */
  readonly takesStreams: boolean;
  /** A create in flight may finish and an adoption start: before `leaving`. */
  readonly startsStreams: boolean;
}

/** A stream record as the legacy adapter writes it: its `spec` is a `StreamSpec`. */
export type LegacyRecord = StreamRecord<StreamSpec>;

/**
 * The deps as every part of streams sees them: the clock and the sources resolved (the real clock
 * and native-only sources unless injected) and this replica's id (the owner in the records it writes).
 */
export type StreamsContext = StreamsDeps & { clock: Clock; replicaId: string; sources: StreamSources };

export interface CreateInput {
  apiKey: string;
  accountId: string;
  spec: StreamSpec;
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

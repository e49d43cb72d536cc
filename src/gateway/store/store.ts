/**
 * All cross-request state of the gateway goes through these roles (slots, stream records,
 * membership, claims, feedback, pub/sub, counters, result windows), so a Redis implementation lets
 * several replicas share it (a keepalive or WebSocket may land on any replica). Each store is one
 * object per role, composed (./compose.ts): ./memory/ (one process) and ./redis/ (a fleet), held to
 * the same contract by one test. Methods are async even in memory so callers are already written
 * for a networked store.
 */
import { ServiceError } from '../../lib/errors';
import type { ResultWindows } from './result-windows';

/**
 * A store call failed (Redis unreachable, a command timed out, Redis refused the write): the caller
 * cannot know the shared state, so the request is refused with 503 `store_unavailable` (legacy body
 * on /v0.2) and a retry-after, never a 500. The underlying error is the `cause`.
 */
export class StoreUnavailableError extends ServiceError {
  override name = 'StoreUnavailableError';
  constructor(
    readonly op: string,
    cause: unknown,
  ) {
    super(503, 'store_unavailable', 'The gateway cannot reach its shared state store; retry shortly.', {
      headers: { 'retry-after': '1' },
      cause,
    });
  }
}

/**
 * Told of every store call by `measuredStore` (./measured.ts): metrics (latency and errors per op)
 * and ./outage.ts (outages).
 */
export interface StoreObserver {
  /** `seconds` the call took; `failed` when it rejected. */
  call(op: string, seconds: number, failed: boolean): void;
}

/**
 * What the store keeps of a legacy stream (serialisable; the live scheduler stays in its process).
 * `Spec` is the stream's configuration as its writer typed it (the store keeps it as JSON).
 */
export interface StreamRecord<Spec = unknown> {
  streamId: string;
  /** sha256 prefix of the owning API key (slots and telemetry are per key). */
  keyHash: string;
  /** The concurrency slot this stream holds (released exactly once when it ends). */
  slotId: string;
  /** Upstream account id (from the balance endpoint), for the 403 rule across keys of one account. */
  accountId: string;
  state: 'active' | 'ended';
  endReason: string | null;
  createdAtMs: number;
  endedAtMs: number | null;
  /** Legacy lease expiry. */
  leaseExpiresAtMs: number;
  /**
   * When the latest legacy keepalive was refused for credits (402: the lease is not renewed), null
   * once one succeeds: a lease that lapses after such a refusal ends the stream `insufficient_credits`.
   * Absent on records written before the field existed (= null).
   */
  creditsRefusedAtMs?: number | null;
  prompt: string;
  promptUpdatedAtMs: number;
  /** The normalized legacy configuration (StreamSpec), stored as JSON. */
  spec: Spec;

  // ── Fleet fields: what any replica needs to act for the stream, and to fence its owner. ──
  /** Replica (GATEWAY_ID) whose timer ticks this stream; null once ended. */
  owner: string | null;
  /** Fencing number, bumped by every claim: a tick committed under an older epoch is refused. */
  epoch: number;
  /** Highest tick number published (-1: none yet). A commit of a tick ≤ this is a duplicate. */
  lastTick: number;
  /** When tick 0 was due (ms; null until the first frame came): a new owner resumes on that grid. */
  gridStartMs: number | null;
  /** Usage since the last legacy keepalive (microcents): ticks add, the keepalive reads and zeroes. */
  costMicrocents: number;
  /** When the previous legacy keepalive was served (or the create), whichever replica served it. */
  lastKeepaliveAtMs: number;
  /** Bumped by every prompt change; a tick commit answers it, so an owner notices a lost message. */
  promptRev: number;
  /** Bound to its owner's process (a webrtc relay): cannot fail over, ends when its owner dies. */
  pinned: boolean;
  /**
   * The stream's media session outside the gateway (a webrtc client's WHIP session in the upstream's
   * room): whichever replica ends the stream ends it. `token` is the latest publish token (renewed
   * by keepalives), sealed like `sealedKey` when the fleet shares its store. Absent or null: none.
   */
  mediaSession?: StoredMediaSession | null;
  /** The client's API key sealed with GATEWAY_SECRET (src/lib/seal.ts); '' once ended. */
  sealedKey: string;
  /** The upstream lease's length the create was told (`ttl_seconds`): a new owner times its renewals from it. Absent: 300 s. */
  upstreamLeaseSeconds?: number;
  /** The stream's fallback models, chosen at create (a new owner keeps them). */
  fallbackModels: string[];
  /**
   * Request id and trace id of the create: an upstream call made for the stream outside any span
   * carries them. `spanId`: the create's span (tracing on), which every later span of the stream
   * links to, on whichever replica owns it then.
   */
  ids: { requestId?: string; traceId: string; spanId?: string };

  // ── Stream info (`GET /v0.2/streams/{id}/info` on any replica); absent on older records (= 0 / unknown). ──
  /** Ticks committed with an ok result / with a failed one (the commit counts them). */
  inferencesCompleted?: number;
  inferencesFailed?: number;
  /** Inference latency of the latest committed tick (ms). */
  lastInferenceMs?: number;
  /** Size of the frames the gateway relays (webrtc and room sources; the upstream does not tell it for native ones). */
  frameWidth?: number;
  frameHeight?: number;
}

/** A stream's media session as its record keeps it (`StreamRecord.mediaSession`). */
export interface StoredMediaSession {
  kind: 'whip';
  /** The WHIP session's resource (absolute URL). */
  resource: string;
  /** The latest publish token: sealed with GATEWAY_SECRET in a fleet, plain in one process's memory. */
  token: string;
}

/** What a tick commit publishes and counts: the fence, the tick, its cost, the message and its outcome. */
export interface TickCommitInput {
  owner: string;
  epoch: number;
  tick: number;
  costMicrocents: number;
  channel: string;
  message: string;
  /** The result's outcome, counted into the record's inference figures (absent: not counted). */
  outcome?: { ok: boolean; inferenceMs: number };
}

/** Answer of `commitTick`: published, or why not (nothing was written then). */
export type TickCommit =
  /** The record's prompt revision and lease as of the commit (a PATCH or keepalive on another replica shows here). */
  | { ok: true; promptRev: number; leaseExpiresAtMs: number }
  /** `fenced`: another owner or epoch; `duplicate`: tick ≤ lastTick; `ended`/`missing`: no active record. */
  | { ok: false; reason: 'fenced' | 'duplicate' | 'ended' | 'missing' };

/** One concurrency slot as the reconciler sees it. */
export interface SlotHolder {
  slotId: string;
  /** Replica that acquired it (null: acquired without one, e.g. by an older replica). */
  replica: string | null;
  /** Stream bound to it once created (null: the create is still in flight, or died with its replica). */
  streamId: string | null;
  acquiredAtMs: number;
}

/** The owner and epoch a replica acts under: the store refuses a fenced write when the record names others. */
export interface OwnerFence {
  owner: string;
  epoch: number;
}

/** Replicas by heartbeat age on the store's clock. */
export interface Membership {
  alive: string[];
  dead: string[];
  /** Replicas (alive or dead) that announced a drain: they take no new streams, handed over or failed over. */
  draining: string[];
  /** Replicas that cannot reach the upstream now (while others may): nobody's handover or failover target. */
  impaired: string[];
  /**
   * The store's time (ms) when read, or a lower bound of it dated from this replica's latest
   * heartbeat (a store may spare a clock read so): never ahead, so nobody is counted dead early.
   */
  nowMs: number;
}

export interface FeedbackRecord {
  id: string;
  stream_id: string;
  accountId: string;
  rating: number;
  category: string;
  feedback: string;
  created_at: string;
  updated_at: string;
}

/** Caps on what one tenant can store as feedback (config `legacy.feedback`). */
export interface FeedbackLimits {
  perStream: number;
  perAccount: number;
}

/** `ok`, or which cap refused the entry. */
export type FeedbackAdd = 'ok' | 'stream_full' | 'account_full';

export interface FeedbackPage {
  items: FeedbackRecord[];
  /** Opaque cursor of the next page; null on the last one. */
  next: string | null;
}

export type Unsubscribe = () => void;

/**
 * One telemetry hash's share of a flush: fields to add to, and fields to lower or raise to a value
 * (first/last seen). Applied atomically per hash; a batch of several hashes is not one transaction.
 */
export interface HashUpdate {
  key: string;
  incr?: Readonly<Record<string, number>>;
  min?: Readonly<Record<string, number>>;
  max?: Readonly<Record<string, number>>;
}

/** Concurrency slots per key, exact across replicas (creates, ends, the slot reconciler). */
export interface Slots {
  /**
   * Takes one of `limit` concurrency slots of a key, atomically. False when full. `replica` records
   * who holds it until `bindSlot` names its stream (the reconciler frees a dead replica's).
   */
  acquireSlot(keyHash: string, slotId: string, limit: number, replica?: string): Promise<boolean>;
  /** Records which stream a slot belongs to (after the upstream create). */
  bindSlot(keyHash: string, slotId: string, streamId: string): Promise<void>;
  /**
   * Puts back the bound slot of a live stream when it is missing (a Redis failover lost the write
   * that took it), whatever the limit: the stream exists, so it counts. True when it was missing.
   */
  restoreSlot(keyHash: string, slotId: string, streamId: string, replica: string): Promise<boolean>;
  /** Every slot of a key with its holder (the reconciler's view). */
  slotHolders(keyHash: string): Promise<SlotHolder[]>;
  /** Key hashes that hold at least one slot (the reconciler walks these). */
  slotKeys(): Promise<string[]>;
  /** Releases a stream's slot; true only the first time (so it is released exactly once). */
  releaseSlot(keyHash: string, streamId: string): Promise<boolean>;
}

/** Stream records, and the fleet operations any replica may run on any stream (ownership, fencing). */
export interface StreamRecords {
  putRecord(rec: StreamRecord): Promise<void>;
  /**
   * Writes `rec` only if the stream has no record (one the store lost, written back from a replica's
   * memory): false when a record is there (another replica that also held the stream wrote it first).
   */
  restoreRecord(rec: StreamRecord): Promise<boolean>;
  getRecord(streamId: string): Promise<StreamRecord | undefined>;
  /** Updates a record with `patch` if it exists; returns the new record. */
  updateRecord(streamId: string, patch: Partial<StreamRecord>): Promise<StreamRecord | undefined>;
  /** Removes the record, and the stream's feedback with it, after `afterMs` (tombstone window). */
  expireRecord(streamId: string, afterMs: number): Promise<void>;
  /**
   * Ends an active stream exactly once across the fleet: state ended, the reason, `endedAtMs`,
   * owner null, sealedKey ''. Returns the record as it was before (the one caller that ended it
   * releases the slot, deletes upstream, publishes the end), undefined when already ended or absent,
   * or, with `fence`, when the record names another owner or epoch (a replica ends only what it owns).
   */
  endStream(streamId: string, reason: string, endedAtMs: number, fence?: OwnerFence): Promise<StreamRecord | undefined>;
  /**
   * Legacy keepalive on an active stream: sets `leaseExpiresAtMs`, reads and zeroes the cost since
   * the previous keepalive and sets `lastKeepaliveAtMs` to `nowMs`, atomically. Returns that cost
   * and the previous keepalive's time; undefined unless active.
   */
  renewLease(streamId: string, leaseExpiresAtMs: number, nowMs: number): Promise<{ costMicrocents: number; sinceMs: number } | undefined>;
  /**
   * Adds a cost the stream incurred outside its ticks (a reinfer of one of its results) to the cost
   * the next keepalive reports. False unless active.
   */
  addCost(streamId: string, costMicrocents: number): Promise<boolean>;
  /** Prompt change on an active stream: sets the prompt and bumps `promptRev`. The new record, else undefined. */
  setPrompt(streamId: string, prompt: string, atMs: number): Promise<StreamRecord | undefined>;
  /**
   * Compare-and-set ownership: if the stream is active and its owner and epoch are `expect`, makes
   * `owner` its owner with epoch + 1. The new record, or undefined (another claimer won, or it ended).
   */
  claimStream(streamId: string, expect: { owner: string | null; epoch: number }, owner: string): Promise<StreamRecord | undefined>;
  /**
   * A tick's result, fenced: if the stream is active, owned by `owner` at `epoch`, and `tick` >
   * lastTick, then in one atomic step sets lastTick, adds `costMicrocents` and publishes `message`
   * on `channel`. Otherwise writes and publishes nothing.
   */
  commitTick(streamId: string, c: TickCommitInput): Promise<TickCommit>;
  /**
   * Active stream ids owned by `replica` (an index kept by put, claim and end). Ids in `vouched`
   * (the streams the asking replica runs: each of their ticks is fenced by the store anyway) are
   * taken from the index without reading their records.
   */
  streamsOf(replica: string, vouched?: ReadonlySet<string>): Promise<string[]>;
  /**
   * The stream ids in the owner indexes of `replicas`, records not read: an entry may name a
   * stream that ended until its owner's next owned-streams reconcile (or a takeover) drops it.
   */
  indexedStreams(replicas: readonly string[]): Promise<Set<string>>;
}

/** Which replicas are alive, on the store's clock. */
export interface Members {
  /** Records that `replica` is alive, on the store's clock; returns that time (ms). */
  heartbeat(replica: string): Promise<number>;
  /** Replicas that ever heartbeat and were not forgotten, split by `deadAfterMs` of silence. */
  membership(deadAfterMs: number): Promise<Membership>;
  /** Announces that `replica` drains: it stays a member (heartbeating) but is nobody's target. */
  markDraining(replica: string): Promise<void>;
  /** Announces (true) or withdraws (false) that `replica` cannot reach the upstream. */
  markImpaired(replica: string, impaired: boolean): Promise<void>;
  /** Drops a replica from the membership (it drained, or its streams were all taken over). */
  forgetReplica(replica: string): Promise<void>;
}

/** Fleet-wide run-once. */
export interface Claims {
  /** True for exactly one caller per `key` within `ttlMs` (roll-up, reconciler). */
  claimOnce(key: string, ttlMs: number): Promise<boolean>;
}

/** Legacy feedback, capped per stream and per account. */
export interface Feedback {
  /** Adds a feedback entry unless a cap is reached (checked and added atomically). */
  addFeedback(rec: FeedbackRecord, limits: FeedbackLimits): Promise<FeedbackAdd>;
  /** An account's feedback, oldest first, `limit` entries after the cursor `after`. */
  feedbackOf(accountId: string, page: { limit: number; after?: string | null }): Promise<FeedbackPage>;
}

/** Pub/sub: result fan-out to the results sockets, and the fleet's control channel. */
export interface Broker {
  /**
   * Every subscriber of a channel gets every later message, in publish order. `route` is the id of
   * the record the channel's messages are ordered with (a results channel's stream id; a control
   * channel's replica id): a Redis Cluster publishes from that record's node, where `commitTick`
   * publishes, so a stream's end never overtakes its last results.
   */
  publish(channel: string, message: string, route: string): Promise<void>;
  /** Resolves once subscribed: every message published after that reaches `onMessage`. */
  subscribe(channel: string, onMessage: (message: string) => void): Promise<Unsubscribe>;
}

/** Telemetry counters (the deprecation usage report): hashes of numbers. */
export interface Counters {
  /** Buffered telemetry in one call (Redis: one round trip, one script per hash, so one hash tag each). */
  hbatch(updates: readonly HashUpdate[]): Promise<void>;
  hgetall(key: string): Promise<Record<string, number>>;
  /** Removes `fields` of a hash (bounded per-key series drop their old fields). */
  hdel(key: string, fields: readonly string[]): Promise<void>;
  keys(prefix: string): Promise<string[]>;
}

/**
 * The whole store, as app.ts builds and closes it: every role's operations (./compose.ts lists
 * them), plus readiness. Each consumer takes only the roles it uses (streams, fleet, sockets,
 * routes, telemetry).
 */
export interface Store extends Slots, StreamRecords, Members, Claims, Feedback, Broker, Counters, ResultWindows {
  ready(): Promise<boolean>;
  close(): Promise<void>;
}

/**
 * All cross-request state of the gateway goes through this interface, so a Redis implementation
 * lets several replicas share it (a keepalive or WebSocket may land on any replica). Methods are
 * async even in memory so callers are already written for a networked store.
 */

/** What the store keeps of a legacy session (serialisable; the live scheduler stays in its process). */
export interface SessionRecord {
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
  prompt: string;
  promptUpdatedAtMs: number;
  /** The normalized legacy configuration (SessionSpec), stored as JSON. */
  spec: unknown;
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

export interface Store {
  /** Takes one of `limit` concurrency slots of a key for a stream, atomically. False when full. */
  acquireSlot(keyHash: string, streamId: string, limit: number): Promise<boolean>;
  /** Releases a stream's slot; true only the first time (so it is released exactly once). */
  releaseSlot(keyHash: string, streamId: string): Promise<boolean>;
  slotsInUse(keyHash: string): Promise<number>;

  putSession(rec: SessionRecord): Promise<void>;
  getSession(streamId: string): Promise<SessionRecord | undefined>;
  /** Updates a session with `patch` if it exists; returns the new record. */
  updateSession(streamId: string, patch: Partial<SessionRecord>): Promise<SessionRecord | undefined>;
  /** Removes the record, and the stream's feedback with it, after `afterMs` (tombstone window). */
  expireSession(streamId: string, afterMs: number): Promise<void>;

  /** Adds a feedback entry unless a cap is reached (checked and added atomically). */
  addFeedback(rec: FeedbackRecord, limits: FeedbackLimits): Promise<FeedbackAdd>;
  /** An account's feedback, oldest first, `limit` entries after the cursor `after`. */
  feedbackOf(accountId: string, page: { limit: number; after?: string | null }): Promise<FeedbackPage>;

  /** Result fan-out: every subscriber of a channel gets every later message, in publish order. */
  publish(channel: string, message: string): Promise<void>;
  /** Resolves once subscribed: every message published after that reaches `onMessage`. */
  subscribe(channel: string, onMessage: (message: string) => void): Promise<Unsubscribe>;

  /** Telemetry counters: `hash` fields incremented by `by`; `setMax`/`setMin` for first/last seen. */
  hincr(key: string, field: string, by?: number): Promise<void>;
  hsetMin(key: string, field: string, value: number): Promise<void>;
  hsetMax(key: string, field: string, value: number): Promise<void>;
  hgetall(key: string): Promise<Record<string, number>>;
  /** Removes `fields` of a hash (bounded per-key series drop their old fields). */
  hdel(key: string, fields: readonly string[]): Promise<void>;
  keys(prefix: string): Promise<string[]>;

  ready(): Promise<boolean>;
  close(): Promise<void>;
}

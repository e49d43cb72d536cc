/**
 * The messages between a replica and its media worker (./media-worker.ts), over the child
 * process's IPC channel (JSON). Frames never cross it: the worker both receives the client's media
 * and publishes it into the upstream's room; only control and figures do.
 */
import type { LegacyConfig } from '../../config';
import type { LegacyMedia, StreamSpec } from '../legacy';

/** A legacy error as it crosses the channel (a ServiceError's status, code, message, shape, details). */
export interface WireError {
  status: number;
  code: string;
  message: string;
  shape?: string;
  details?: unknown;
}

export interface RelayRequest {
  spec: StreamSpec;
  streamId: string;
  publishUrl: string;
  publishToken: string;
}

/** Replica → worker. */
export type ToWorker =
  /** First message: the relay's settings (none: a worker for the test pattern alone). */
  | { op: 'init'; cfg?: Pick<LegacyConfig, 'relay' | 'turnServers' | 'webrtc'>; logLevel: string }
  | { op: 'start'; req: number; relay: RelayRequest }
  | { op: 'stop'; req: number; streamId: string }
  | { op: 'renew'; streamId: string; token: string }
  /** The conformance kit's test pattern into a room, until `stop` names `streamId`. */
  | { op: 'pattern'; req: number; streamId: string; url: string; token: string }
  /** Stop every relay, release the native side, exit 0. */
  | { op: 'close' };

/** A relay's figures, as the worker reports them every second. */
export interface WorkerStreamStats {
  streamId: string;
  framesIn: number;
  framesRelayed: number;
  upstreamConnected: boolean;
}

/** Worker → replica. */
export type FromWorker =
  | { op: 'ready'; pid: number }
  | { op: 'started'; req: number; media: LegacyMedia }
  | { op: 'failed'; req: number; error: WireError }
  | { op: 'stopped'; req: number }
  | { op: 'lost'; streamId: string }
  | { op: 'frameSize'; streamId: string; width: number; height: number }
  /** Every second: the worker's own figures (a heartbeat: its silence means a stall). */
  | { op: 'stats'; rssBytes: number; heapUsedBytes: number; cpuMicros: number; streams: WorkerStreamStats[] };

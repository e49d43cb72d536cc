/**
 * The registry of this process's streams: the ones it schedules (each a `LiveStream` owning its own
 * state, its phase included: a create writing its record is registered `creating`), and the upstream
 * streams it created or adopted and has not seen deleted (owned: `closeAll` deletes what is left).
 * Nothing else holds these maps. It never touches the store: what it stops here, it stops here only.
 */
import type { Logger } from '../../../lib/logger';
import type { LiveStream } from './live-stream';
import type { LegacyObserver, StreamSources } from './ports';

export interface StreamRegistryDeps {
  logger: Logger;
  /** Each stream's source stops what it runs here when the stream stops here. */
  sources: Pick<StreamSources, 'of'>;
  observer?: Pick<LegacyObserver, 'ownedStreamCount'>;
}

export class StreamRegistry {
  private readonly live = new Map<string, LiveStream>();
  /** Upstream stream id → the key that may delete it. */
  private readonly owned = new Map<string, string>();
  /**
   * Ticking paused on every stream here (a replica whose heartbeat fails fences itself). Not a
   * lifecycle state (../../lifecycle.ts): it comes and goes with the heartbeat, whatever the state.
   */
  selfFenced = false;

  constructor(private readonly deps: StreamRegistryDeps) {}

  /** Streams scheduled here. */
  get size(): number {
    return this.live.size;
  }

  get(streamId: string): LiveStream | undefined {
    return this.live.get(streamId);
  }

  /** Ids of the streams scheduled here. */
  ids(): string[] {
    return [...this.live.keys()];
  }

  /** The streams scheduled here, as of now (a copy: stopping one while walking it is safe). */
  streams(): LiveStream[] {
    return [...this.live.values()];
  }

  /** Schedules `stream` here; its upstream stream is owned (deleted at `closeAll` unless deleted before). */
  add(stream: LiveStream): void {
    this.live.set(stream.id, stream);
    this.owned.set(stream.id, stream.apiKey);
    this.deps.observer?.ownedStreamCount?.(this.live.size);
  }

  /**
   * Stops a stream's scheduler, timers and media here; its upstream stream stays owned (the caller
   * deletes it, or it was not ours to delete: `remove`). Once: a fenced commit, an `ended` message
   * and the reconcile may all ask.
   */
  async stop(stream: LiveStream): Promise<void> {
    const id = stream.id;
    stream.stop();
    if (this.live.get(id) !== stream) return;
    this.live.delete(id);
    this.deps.observer?.ownedStreamCount?.(this.live.size);
    try {
      await this.deps.sources.of(stream.record.spec.transport).stop(id);
    } catch (err) {
      this.deps.logger.warn({ err, streamId: id }, "the stream's media did not stop cleanly");
    }
  }

  /** The stream leaves this replica entirely: stopped here (if it runs) and no longer owned. */
  async remove(streamId: string): Promise<void> {
    const stream = this.live.get(streamId);
    if (stream) await this.stop(stream);
    this.owned.delete(streamId);
  }

  // ── Upstream streams this process may delete. ──

  own(streamId: string, apiKey: string): void {
    this.owned.set(streamId, apiKey);
  }

  forget(streamId: string): void {
    this.owned.delete(streamId);
  }

  /** Owned upstream streams (id, key), as of now. */
  ownedStreams(): [string, string][] {
    return [...this.owned];
  }

  /** The client's key of a stream, if this process holds it (scheduled or owned). */
  keyOf(streamId: string): string | undefined {
    return this.live.get(streamId)?.apiKey ?? this.owned.get(streamId);
  }
}

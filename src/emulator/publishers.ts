import type { EmulatorConfig } from '../config';
import type { Logger } from '../lib/logger';
import type { EmulatedStream, StreamRegistry } from './streams';
import { SyntheticPublisher } from './synthetic';
import type { LiveVideoOutlet } from './synthetic';

export interface PublishOptions {
  fps: number;
  width: number;
  height: number;
}

/** Where a stream's synthetic frames are shown live (its media room's viewers); `stop` withdraws it. */
export type LiveOutletFactory = (stream: EmulatedStream, opts: PublishOptions) => LiveVideoOutlet & { stop(): void };

/**
 * The synthetic test-pattern publisher of each stream: started through the control API or, with
 * `emulator.autoPublish`, for every new stream; always stopped when its stream ends. Its frames go
 * into the stream's buffer and, through `liveOutlet`, to the viewers in the stream's room.
 */
export class SyntheticPublishers {
  private readonly running = new Map<string, { pub: SyntheticPublisher; live: (LiveVideoOutlet & { stop(): void }) | undefined }>();

  constructor(
    private readonly streams: StreamRegistry,
    private readonly logger: Logger,
    autoPublish: EmulatorConfig['autoPublish'],
    private readonly liveOutlet?: LiveOutletFactory,
  ) {
    streams.onEnd((s) => this.stop(s.id));
    if (autoPublish.enabled) {
      streams.onCreate((s) => this.start(s, autoPublish));
    }
  }

  start(stream: EmulatedStream, opts: PublishOptions): void {
    this.stop(stream.id);
    const frames = stream.frames;
    const live = this.liveOutlet?.(stream, opts);
    let pub: SyntheticPublisher;
    try {
      pub = new SyntheticPublisher({
        fps: opts.fps,
        width: opts.width,
        height: opts.height,
        nextIndex: () => frames.nextIndex,
        sink: (raw) => {
          frames.ingest(raw).catch((err: unknown) => this.logger.warn({ err, stream: stream.id }, 'synthetic frame dropped'));
        },
        live,
      });
    } catch (err) {
      live?.stop();
      throw err;
    }
    pub.start();
    this.running.set(stream.id, { pub, live });
  }

  stop(streamId: string): boolean {
    const entry = this.running.get(streamId);
    if (!entry) return false;
    entry.pub.stop();
    entry.live?.stop();
    this.running.delete(streamId);
    return true;
  }

  isRunning(streamId: string): boolean {
    return this.running.has(streamId);
  }

  stopAll(): void {
    for (const id of [...this.running.keys()]) this.stop(id);
  }
}

import type { EmulatorConfig } from '../config';
import type { Logger } from '../lib/logger';
import type { EmulatedStream, StreamRegistry } from './streams';
import { SyntheticPublisher } from './synthetic';

export interface PublishOptions {
  fps: number;
  width: number;
  height: number;
}

/**
 * The synthetic test-pattern publisher of each stream: started through the control API or, with
 * `emulator.autoPublish`, for every new stream; always stopped when its stream ends.
 */
export class SyntheticPublishers {
  private readonly running = new Map<string, SyntheticPublisher>();

  constructor(
    private readonly streams: StreamRegistry,
    private readonly logger: Logger,
    autoPublish: EmulatorConfig['autoPublish'],
  ) {
    streams.onEnd((s) => this.stop(s.id));
    if (autoPublish.enabled) {
      streams.onCreate((s) => this.start(s, autoPublish));
    }
  }

  start(stream: EmulatedStream, opts: PublishOptions): void {
    this.stop(stream.id);
    const frames = stream.frames;
    const pub = new SyntheticPublisher({
      fps: opts.fps,
      width: opts.width,
      height: opts.height,
      nextIndex: () => frames.nextIndex,
      sink: (raw) => {
        frames.ingest(raw).catch((err: unknown) => this.logger.warn({ err, stream: stream.id }, 'synthetic frame dropped'));
      },
    });
    pub.start();
    this.running.set(stream.id, pub);
  }

  stop(streamId: string): boolean {
    const pub = this.running.get(streamId);
    if (!pub) return false;
    pub.stop();
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

/**
 * The media worker: the child process in which every native media object of a replica lives
 * (`@roamhq/wrtc`, `@livekit/rtc-node`), so a crash in native code ends this process, never the
 * replica's (./worker-relay.ts supervises it and restarts it). It runs an `IngestRelay` and the
 * conformance kit's test pattern, driven over the IPC channel (./worker-protocol.ts); frames never
 * cross the channel. It exits explicitly (a process that created wrtc video objects can segfault on
 * a natural exit), and when the replica that forked it is gone.
 */
import { ServiceError } from '../../lib/errors';
import { createLogger } from '../../lib/logger';
import type { Logger } from '../../lib/logger';
import { loadRtc } from './natives';
import { IngestRelay } from './relay';
import { publishTestPattern } from './test-pattern';
import type { TestPattern } from './test-pattern';
import type { FromWorker, ToWorker, WireError } from './worker-protocol';

const STATS_EVERY_MS = 1000;

let relay: IngestRelay | undefined;
let logger: Logger = createLogger('info', 'media-worker');
const patterns = new Map<string, TestPattern>();
let closing = false;

function send(message: FromWorker): void {
  if (process.connected) process.send?.(message);
}

function wire(err: unknown): WireError {
  if (err instanceof ServiceError) {
    return { status: err.status, code: err.code, message: err.message, shape: err.shape, details: err.options.details };
  }
  logger.error({ err }, 'media worker: request failed');
  return { status: 500, code: 'internal_error', message: err instanceof Error ? err.message : String(err) };
}

function stats(): void {
  const mem = process.memoryUsage();
  const cpu = process.cpuUsage();
  const streams = (relay?.streamIds() ?? []).flatMap((streamId) => {
    const s = relay?.stats(streamId);
    return s ? [{ streamId, framesIn: s.framesIn, framesRelayed: s.framesRelayed, upstreamConnected: s.upstreamConnected }] : [];
  });
  for (const [streamId, p] of patterns) streams.push({ streamId, framesIn: 0, framesRelayed: p.framesPublished, upstreamConnected: true });
  send({ op: 'stats', rssBytes: mem.rss, heapUsedBytes: mem.heapUsed, cpuMicros: cpu.user + cpu.system, streams });
}

async function close(code: number): Promise<never> {
  if (!closing) {
    closing = true;
    await Promise.allSettled([...patterns.values()].map((p) => p.stop()));
    await relay?.close().catch((err: unknown) => logger.warn({ err }, 'media worker: relay did not close cleanly'));
  }
  process.exit(code);
}

async function handle(message: ToWorker): Promise<void> {
  switch (message.op) {
    case 'init':
      logger = createLogger(message.logLevel, 'media-worker');
      if (message.cfg) relay = new IngestRelay({ cfg: message.cfg, logger: logger.child({ component: 'ingest' }) });
      setInterval(stats, STATS_EVERY_MS).unref();
      send({ op: 'ready', pid: process.pid });
      return;
    case 'start': {
      const { streamId } = message.relay;
      try {
        if (!relay) throw new Error('this media worker runs no relay (it was started without relay settings)');
        const media = await relay.start({
          ...message.relay,
          onLost: () => send({ op: 'lost', streamId }),
          onFrameSize: (width, height) => send({ op: 'frameSize', streamId, width, height }),
        });
        send({ op: 'started', req: message.req, media });
      } catch (err) {
        send({ op: 'failed', req: message.req, error: wire(err) });
      }
      return;
    }
    case 'stop': {
      const pattern = patterns.get(message.streamId);
      patterns.delete(message.streamId);
      await Promise.allSettled([pattern?.stop(), relay?.stop(message.streamId)]);
      send({ op: 'stopped', req: message.req });
      return;
    }
    case 'renew':
      relay?.renewToken(message.streamId, message.token);
      return;
    case 'pattern':
      try {
        patterns.set(message.streamId, await publishTestPattern(await loadRtc(), message.url, message.token, logger));
        send({ op: 'started', req: message.req, media: { transport: 'native', url: message.url, token: '' } });
      } catch (err) {
        send({ op: 'failed', req: message.req, error: wire(err) });
      }
      return;
    case 'close':
      return void (await close(0));
  }
}

process.on('message', (message: ToWorker) => void handle(message));
// The replica is gone (crashed, killed): nothing drives this process any more.
process.on('disconnect', () => void close(0));
process.on('SIGTERM', () => void close(0));
// A Ctrl-C reaches the whole process group: the replica decides when its media stops.
process.on('SIGINT', () => undefined);

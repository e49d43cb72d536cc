/**
 * `LegacyStreams` wired as app.ts wires them, on a FakeClock: a memory store, a real upstream client
 * and catalog against `upstreamUrl` (the emulator), a lifecycle that stays `serving`. `streams()`
 * builds one replica's streams (its fleet link and any other deps given); `idle()` says no upstream
 * call is running, when the fake clock may move (./fake-clock.ts `driveUntil`).
 */
import { brandOf } from '../../src/brand';
import type { Config } from '../../src/config';
import { UpstreamCatalog } from '../../src/gateway/legacy/streams/catalog';
import { LegacyStreams } from '../../src/gateway/legacy/streams/legacy-streams';
import type { StreamsDeps } from '../../src/gateway/legacy/streams/ports';
import { Lifecycle } from '../../src/gateway/lifecycle';
import { memoryStore } from '../../src/gateway/store/memory';
import { createLogger } from '../../src/lib/logger';
import { UpstreamClient } from '../../src/upstream/client';
import { FAST_RETRY } from './config';
import { FakeClock, callsInFlight } from './fake-clock';

export function fakeClockStreams(upstreamUrl: string, cfg: Config) {
  const logger = createLogger(cfg.logLevel);
  const brand = brandOf(cfg);
  const clock = new FakeClock(Date.now());
  const store = memoryStore();
  const upstream = new UpstreamClient({ baseUrl: upstreamUrl, brand, logger, retry: FAST_RETRY });
  const running = callsInFlight(upstream);
  const catalog = new UpstreamCatalog(upstream, { modelsCacheMs: 60_000, accountCacheMs: 60_000, logger });
  return {
    clock,
    store,
    upstream,
    idle: () => running() === 0,
    streams: (deps: Pick<StreamsDeps, 'fleet'> & Partial<StreamsDeps>) =>
      new LegacyStreams({ cfg: cfg.legacy, brand, logger, store, upstream, catalog, clock, lifecycle: new Lifecycle(), ...deps }),
    /** Closes the upstream client and the store (close the streams first). */
    async close() {
      await upstream.close();
      await store.close();
    },
  };
}

/**
 * The one config builder for tests: the project's own defaults (config/default.json, the schema's
 * defaults), then what every test runs with, then each test's layers, deep-merged in that order.
 */
import { loadConfig, mergeDeep } from '../../src/config';
import type { Config } from '../../src/config';

/**
 * What every test config starts from: the gateway and the emulator on loopback port 0, the
 * emulator's control API, quick first-frame polling, logs off unless TEST_LOG_LEVEL says otherwise.
 */
export const TEST_DEFAULTS = {
  port: 0,
  host: '127.0.0.1',
  logLevel: process.env.TEST_LOG_LEVEL ?? 'silent',
  emulator: { port: 0, controlApi: true },
  legacy: { firstFramePollMs: 50 },
};

/** The emulator's synthetic publisher as tests run it on every stream: 10 fps of small frames. */
export const TEST_PUBLISHER = { enabled: true, fps: 10, width: 160, height: 120 };

/** Retry waits shrunk a hundredfold (the `retry` of `startGateway` and `UpstreamClient`). */
export const FAST_RETRY = { scale: 0.01 };

/**
 * A `Config` from `TEST_DEFAULTS` and `layers` deep-merged over it, later layers winning (a nested
 * object merges; to drop a value, set it to `undefined`). No environment is read.
 */
export function testConfig(...layers: Record<string, unknown>[]): Config {
  return loadConfig({
    env: {},
    overrides: layers.reduce<Record<string, unknown>>((merged, layer) => mergeDeep(merged, layer), TEST_DEFAULTS),
  });
}

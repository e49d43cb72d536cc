/** The emulator's provider-behaviour settings: defaults, environment, and boot errors that name the key. */
import { ConfigError, loadConfig } from '../../src/config';

const load = (emulator: Record<string, unknown> = {}, env: Record<string, string> = {}) =>
  loadConfig({ env, overrides: { emulator } }).emulator;

describe('emulator settings of the provider behaviours', () => {
  it('defaults: the contract, nothing fetched, no host allowed, no rate limit, no reaping', () => {
    expect(load()).toMatchObject({
      dialect: 'contract',
      checkout: { sessionTtlSeconds: 86_400, maxSessions: 10_000 },
      imageFetch: { allowedHosts: [], maxBytes: 10 * 1024 * 1024, timeoutMs: 5000 },
      cameraSources: { allowedHosts: [], connectTimeoutMs: 3000 },
      rateLimit: { completionsPerSecond: 0, per: 'account' },
      reapIdleSeconds: 0,
      room: { whip: { enabled: true, iceServers: [] } },
    });
  });

  it('reads the environment; hosts are lower-cased', () => {
    const cfg = load(
      {},
      {
        EMULATOR_DIALECT: 'provider',
        EMULATOR_IMAGE_FETCH_ALLOWED_HOSTS: 'Images.Example.com, 127.0.0.1:8080',
        EMULATOR_CAMERA_ALLOWED_HOSTS: '[::1]',
        EMULATOR_RATE_LIMIT_PER_SECOND: '5',
        EMULATOR_REAP_IDLE_SECONDS: '900',
        EMULATOR_ROOM_WHIP: 'false',
      },
    );
    expect(cfg).toMatchObject({
      dialect: 'provider',
      imageFetch: { allowedHosts: ['images.example.com', '127.0.0.1:8080'] },
      cameraSources: { allowedHosts: ['[::1]'] },
      rateLimit: { completionsPerSecond: 5 },
      reapIdleSeconds: 900,
      room: { whip: { enabled: false } },
    });
  });

  it.each([
    [{ dialect: 'openai' }, 'emulator.dialect'],
    [{ imageFetch: { allowedHosts: ['http://images.example.com'] } }, 'emulator.imageFetch.allowedHosts.0'],
    [{ imageFetch: { maxBytes: 0 } }, 'emulator.imageFetch.maxBytes'],
    [{ cameraSources: { allowedHosts: ['a b'] } }, 'emulator.cameraSources.allowedHosts.0'],
    [{ rateLimit: { completionsPerSecond: 1.5 } }, 'emulator.rateLimit.completionsPerSecond'],
    [{ rateLimit: { per: 'ip' } }, 'emulator.rateLimit.per'],
    [{ reapIdleSeconds: -1 }, 'emulator.reapIdleSeconds'],
    [{ checkout: { sessionTtlSeconds: 0 } }, 'emulator.checkout.sessionTtlSeconds'],
    [{ room: { whip: { iceServers: [{ urls: [] }] } } }, 'emulator.room.whip.iceServers.0.urls'],
  ])('%j fails at boot naming %s', (emulator, key) => {
    expect(() => load(emulator)).toThrow(ConfigError);
    expect(() => load(emulator)).toThrow(new RegExp(`${key.replaceAll('.', '\\.')}:`));
  });
});

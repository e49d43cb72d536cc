/** legacy.webrtc: defaults, the environment, and boot errors that name the key. */
import { ConfigError, loadConfig } from '../../../src/config';

const load = (legacy: Record<string, unknown> = {}, env: Record<string, string> = {}) => loadConfig({ env, overrides: { legacy } }).legacy;

test('defaults: WHIP, a 10 s answer bound, frames read every 2 s, lost after 10 s, a first frame within 20 s', () => {
  expect(load().webrtc).toEqual({
    mode: 'whip',
    answerTimeoutMs: 10_000,
    frameCheckMs: 2000,
    framesLostMs: 10_000,
    firstFrameTimeoutMs: 20_000,
    iceServers: [],
  });
});

test('LEGACY_WEBRTC_MODE picks the relay', () => {
  expect(load({}, { LEGACY_WEBRTC_MODE: 'relay' }).webrtc.mode).toBe('relay');
});

test.each([
  [{ webrtc: { mode: 'sfu' } }, 'legacy.webrtc.mode'],
  [{ webrtc: { framesLostMs: 500 } }, 'legacy.webrtc.framesLostMs'],
  [{ webrtc: { answerTimeoutMs: 120_000 } }, 'legacy.webrtc.answerTimeoutMs'],
  // The relay's ICE servers are webrtc settings now: the old key is refused by name, not ignored.
  [{ relay: { iceServers: [] } }, 'legacy.relay'],
])('%j fails at boot naming %s', (legacy, key) => {
  expect(() => load(legacy)).toThrow(ConfigError);
  expect(() => load(legacy)).toThrow(new RegExp(`${key.replaceAll('.', '\\.')}:`));
});

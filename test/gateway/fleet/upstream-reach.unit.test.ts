import { UpstreamReach } from '../../../src/gateway/fleet/upstream-reach';
import { FakeClock } from '../../helpers/fake-clock';

const setup = () => {
  const clock = new FakeClock(0);
  return { clock, reach: new UpstreamReach({ failuresInARow: 3, recoverAfterMs: 10_000, clock }) };
};

test('impaired after the given number of ticks in a row without an answer; an answer in between starts the count again', () => {
  const { reach } = setup();
  reach.upstreamReach(false);
  reach.upstreamReach(false);
  reach.upstreamReach(true);
  reach.upstreamReach(false);
  reach.upstreamReach(false);
  expect(reach.impaired(true)).toBe(false);
  reach.upstreamReach(false);
  expect(reach.impaired(false)).toBe(true);
});

test('recovers only once the probe answers and no tick has failed for the recovery time', () => {
  const { clock, reach } = setup();
  for (let i = 0; i < 3; i++) reach.upstreamReach(false);
  clock.advance(9_999);
  expect(reach.impaired(true)).toBe(true);
  clock.advance(1);
  // The probe has not answered (or says down): still impaired.
  expect(reach.impaired(undefined)).toBe(true);
  expect(reach.impaired(false)).toBe(true);
  // A failure restarts the wait.
  reach.upstreamReach(false);
  clock.advance(5_000);
  expect(reach.impaired(true)).toBe(true);
  clock.advance(5_000);
  expect(reach.impaired(true)).toBe(false);
  // Recovered: one failure alone does not impair it again.
  reach.upstreamReach(false);
  expect(reach.impaired(true)).toBe(false);
});

/**
 * The most frames a relay that forwards at most `fps` a second (src/gateway/ingest/rate.ts) can have
 * stored upstream in `elapsedMs`, measured by the test from before the stream was created to after
 * the count was read. That span only grows on a loaded machine, so load loosens this ceiling and
 * never tightens it; a relay that passed the camera's own rate would overshoot it. The sampler lets
 * a steady source within 5 % of the rate pass whole, hence the factor; one frame more for each end.
 */
export function relayedFramesCeiling(fps: number, elapsedMs: number): number {
  return Math.floor((fps * 1.05 * elapsedMs) / 1000) + 2;
}

/** `npm run bench`: every benchmark section, printing figures (never asserting timings). */
import type { Config } from './config';

/** Flags of `bench` (strings as given; `chaos` reads duration, seed, interval, streams). */
export type BenchFlags = Record<string, string | boolean | undefined>;

type Section = (cfg: Config, flags: BenchFlags) => Promise<void>;

const SECTIONS: Record<string, () => Promise<Section>> = {};

export function registerSection(name: string, load: () => Promise<Section>): void {
  SECTIONS[name] = load;
}

registerSection('pattern', async () => {
  const m = await import('./bench/pattern');
  return async () => {
    await m.benchPattern();
  };
});
registerSection('frame-memory', async () => (await import('./bench/frame-memory')).benchFrameMemory);
registerSection('emulator', async () => {
  const m = await import('./bench/emulator');
  return async () => {
    await m.benchReferences();
    await m.benchCompletion();
  };
});
registerSection('legacy', async () => {
  const m = await import('./bench/legacy');
  // The 1,000 streams, and a size at which a 2-core machine also runs the emulator and
  // the clients without saturating (BENCH_STREAMS overrides both).
  const sizes = process.env.BENCH_STREAMS ? [Number(process.env.BENCH_STREAMS)] : [300, 1000];
  return async (cfg) => {
    for (const streams of sizes) await m.benchLegacy(cfg, { streams });
  };
});
registerSection('passthrough', async () => (await import('./bench/passthrough')).benchPassthrough);
registerSection('telemetry', async () => (await import('./bench/telemetry')).benchTelemetry);
registerSection('upstream-outage', async () => (await import('./bench/upstream-outage')).benchUpstreamOutage);
registerSection('relay', async () => (await import('./bench/relay')).benchRelay);
registerSection('sunset', async () => (await import('./bench/sunset')).benchSunset);
registerSection('store', async () => (await import('./bench/store')).benchStore);
registerSection('fleet', async () => (await import('./bench/fleet-bench')).benchFleet);
registerSection('rolling', async () => (await import('./bench/rolling-bench')).benchRolling);
registerSection('hostile', async () => (await import('./bench/hostile')).benchHostile);
registerSection('chaos', async () => (await import('./bench/chaos')).benchChaos);

/** Sections that run only when named (long: `chaos` takes its --duration). */
const ON_REQUEST = new Set(['chaos']);

export async function runBench(cfg: Config, only: string[], flags: BenchFlags = {}): Promise<void> {
  const names = only.length ? only : Object.keys(SECTIONS).filter((n) => !ON_REQUEST.has(n));
  for (const name of names) {
    const load = SECTIONS[name];
    if (!load) {
      console.error(`unknown bench section ${name}; known: ${Object.keys(SECTIONS).join(', ')}`);
      process.exitCode = 2;
      continue;
    }
    console.log(`\n== ${name} ==`);
    await (await load())(cfg, flags);
  }
  // wrtc/rtc-node handles may keep the loop alive; the figures are printed, so leave.
  process.exit(process.exitCode ?? 0);
}

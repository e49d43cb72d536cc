/** The `chaos` section: a long seeded chaos run on real processes (the runner is test/helpers/chaos.ts, shared with the fleet's chaos test). */
import type { Config } from '../src/config';
import { formatChaos, runChaos } from '../test/helpers/chaos';
import type { BenchFlags } from './main';
import { MAIN } from './util';

/** `npm run bench -- chaos [--duration 600] [--seed 42] [--interval 15] [--streams 40] [--store redis|sentinel] [--verbose]`: prints the report; exit code 1 when an invariant fails. */
export async function benchChaos(cfg: Config, flags: BenchFlags): Promise<void> {
  const num = (v: string | boolean | undefined, d: number) => (typeof v === 'string' ? Number(v) : d);
  if (flags.store === 'cluster')
    throw new Error('chaos runs on one redis-server or a Sentinel set (--store redis|sentinel), not a Cluster');
  const report = await runChaos({
    main: MAIN,
    brand: cfg.brand,
    seed: num(flags.seed, 42),
    durationMs: num(flags.duration, 600) * 1000,
    faultEveryMs: num(flags.interval, 15) * 1000,
    streams: num(flags.streams, 40),
    store: flags.store === 'sentinel' ? 'sentinel' : 'redis',
    log: (l) => console.log(l),
    verbose: flags.verbose === true,
  });
  console.log(formatChaos(report));
  if (!report.ok) process.exitCode = 1;
}

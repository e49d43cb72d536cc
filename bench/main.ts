/**
 * `npm run bench [SECTION...] [-- flags]`: the benchmark sections, printing figures (never
 * asserting timings). Compiled with tsconfig.bench.json to dist-bench/ (never into dist/ or the
 * image); the sections that need whole processes run the built CLI, dist/main.js.
 */
import { parseArgs } from 'node:util';
import { ConfigError, loadConfig } from '../src/config';
import type { Config } from '../src/config';

/** Flags of the bench (strings as given; `chaos` reads duration, seed, interval, streams). */
export type BenchFlags = Record<string, string | boolean | undefined>;

type Section = (cfg: Config, flags: BenchFlags) => Promise<void>;

const SECTIONS: Record<string, () => Promise<Section>> = {};

function registerSection(name: string, load: () => Promise<Section>): void {
  SECTIONS[name] = load;
}

registerSection('pattern', async () => {
  const m = await import('./pattern');
  return async () => {
    await m.benchPattern();
  };
});
registerSection('frame-memory', async () => (await import('./frame-memory')).benchFrameMemory);
registerSection('emulator', async () => {
  const m = await import('./emulator');
  return async () => {
    await m.benchReferences();
    await m.benchCompletion();
  };
});
registerSection('legacy', async () => {
  const m = await import('./legacy');
  // 1,000 streams, the size the gateway is specified for, and a size at which a 2-core machine
  // also runs the emulator and the clients without saturating (BENCH_STREAMS overrides both).
  const sizes = process.env.BENCH_STREAMS ? [Number(process.env.BENCH_STREAMS)] : [300, 1000];
  return async (cfg) => {
    for (const streams of sizes) await m.benchLegacy(cfg, { streams });
    await (await import('./cadence')).benchCadence(cfg);
  };
});
registerSection('cadence', async () => (await import('./cadence')).benchCadence);
registerSection('passthrough', async () => (await import('./passthrough')).benchPassthrough);
registerSection('telemetry', async () => (await import('./telemetry')).benchTelemetry);
registerSection('upstream-outage', async () => (await import('./upstream-outage')).benchUpstreamOutage);
registerSection('relay', async () => (await import('./relay')).benchRelay);
registerSection('room-viewer', async () => {
  // rtc-node logs at debug level unless NODE_ENV=production when it is loaded.
  process.env.NODE_ENV = 'production';
  return (await import('./room-viewer')).benchRoomViewer;
});
registerSection('sunset', async () => (await import('./sunset')).benchSunset);
registerSection('store', async () => (await import('./store')).benchStore);
registerSection('fleet', async () => (await import('./fleet-bench')).benchFleet);
registerSection('rolling', async () => (await import('./rolling-bench')).benchRolling);
registerSection('hostile', async () => (await import('./hostile')).benchHostile);
registerSection('scale', async () => (await import('./scale')).benchScale);
registerSection('chaos', async () => (await import('./chaos')).benchChaos);

/** Sections that run only when named (long: `chaos` takes its --duration). */
const ON_REQUEST = new Set(['chaos']);

async function runBench(cfg: Config, only: string[], flags: BenchFlags = {}): Promise<void> {
  const names = only.length ? only : Object.keys(SECTIONS).filter((n) => !ON_REQUEST.has(n));
  for (const name of names) {
    console.log(`\n== ${name} ==`);
    await (
      await SECTIONS[name]!()
    )(cfg, flags);
  }
  // wrtc/rtc-node handles may keep the loop alive; the figures are printed, so leave.
  process.exit(process.exitCode ?? 0);
}

const USAGE = `usage: npm run bench -- [SECTION...] [--duration S] [--seed N] [--interval S] [--streams N] [--store S] [--verbose] [--config FILE]

  SECTION             run only these sections (default: all but chaos): ${Object.keys(SECTIONS).join(', ')}
  --duration S        chaos: seconds of faults (default 600)
  --seed N            chaos: seed of the fault sequence (default 42)
  --interval S        chaos: seconds between faults (default 15)
  --streams N         chaos: streams, 5 per API key (default 40); scale: streams (BENCH_SCALE_STREAMS, a list, default 300)
  --store S           chaos: redis (default: one redis-server) or sentinel (a primary, two replicas, three sentinels);
                      scale: redis (default) or cluster (a 3-primary Redis Cluster, commands per primary; BENCH_SCALE_STORE)
  --verbose           chaos: print every replica line at warn or above as it comes
  --replicas LIST     scale: replica counts, 1 = one process on the memory store (BENCH_SCALE_REPLICAS, default 1,3)
  -c, --config FILE   JSON config layered over config/default.json (docs/configuration.md)
  -h, --help          this help
`;

/** Parses the bench's command line strictly (a mistyped flag is refused); exit 2 with a message otherwise. */
function parseBenchArgs(argv: string[]): { sections: string[]; flags: BenchFlags; config?: string } {
  const fail = (message: string): never => {
    process.stderr.write(`bench: ${message}\n\n${USAGE}`);
    process.exit(2);
  };
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      strict: true,
      options: {
        config: { type: 'string', short: 'c' },
        help: { type: 'boolean', short: 'h' },
        duration: { type: 'string' },
        seed: { type: 'string' },
        interval: { type: 'string' },
        streams: { type: 'string' },
        replicas: { type: 'string' },
        verbose: { type: 'boolean' },
        store: { type: 'string' },
      },
    });
  } catch (err) {
    return fail((err as Error).message);
  }
  const flags = parsed.values as BenchFlags;
  if (flags.help) {
    process.stdout.write(USAGE);
    process.exit(0);
  }
  for (const flag of ['duration', 'seed', 'interval', 'streams']) {
    const v = flags[flag];
    if (v !== undefined && !(Number.isInteger(Number(v)) && Number(v) > 0))
      fail(`--${flag} must be a whole number > 0, got '${String(v)}'`);
  }
  if (flags.store !== undefined && !['redis', 'sentinel', 'cluster'].includes(String(flags.store)))
    fail(`--store must be redis, sentinel (chaos) or cluster (scale), got '${String(flags.store)}'`);
  if (flags.replicas !== undefined && !/^[1-9]\d*(,[1-9]\d*)*$/.test(String(flags.replicas)))
    fail(`--replicas must be whole numbers > 0 separated by commas, got '${String(flags.replicas)}'`);
  const unknown = parsed.positionals.filter((n) => !Object.hasOwn(SECTIONS, n));
  if (unknown.length) fail(`unknown section ${unknown.join(', ')}`);
  return { sections: parsed.positionals, flags, config: flags.config as string | undefined };
}

if (require.main === module) {
  const { sections, flags, config } = parseBenchArgs(process.argv.slice(2));
  let cfg: Config;
  try {
    cfg = loadConfig({ file: config });
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    process.stderr.write(`${err.message}\n`);
    process.exit(2);
  }
  runBench(cfg, sections, flags).catch((err: unknown) => {
    process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  });
}

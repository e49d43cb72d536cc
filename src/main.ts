#!/usr/bin/env node
/**
 * CLI: `serve` (the gateway; starts the embedded emulator when no upstream is configured),
 * `emulator` (the emulator alone), `demo` (a legacy terminal client), `bench` (benchmarks).
 */
import { ConfigError, loadConfig } from './config';
import type { Config } from './config';
import { createLogger } from './lib/logger';
import type { Logger } from './lib/logger';
import { startEmulator } from './emulator/server';

const USAGE = `usage: legacy-gateway <serve|emulator|demo|bench> [--config FILE]

  serve      run the gateway (with the embedded emulator unless UPSTREAM_URL is set)
  emulator   run the /v1beta + /billing emulator alone
  demo       a legacy /v0.2 terminal client against a running gateway
  bench      run the benchmarks and print figures
`;

type Stopper = () => Promise<void>;

function onSignals(logger: Logger, stop: Stopper, graceMs: number): void {
  let stopping = false;
  const handler = (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'shutting down');
    const force = setTimeout(() => {
      logger.warn({ graceMs }, 'grace period over, exiting');
      process.exit(1);
    }, graceMs + 1000);
    force.unref();
    stop()
      .then(() => process.exit(0))
      .catch((err: unknown) => {
        logger.error({ err }, 'shutdown failed');
        process.exit(1);
      });
  };
  process.on('SIGTERM', () => handler('SIGTERM'));
  process.on('SIGINT', () => handler('SIGINT'));
}

async function runEmulator(cfg: Config, logger: Logger): Promise<void> {
  const emu = await startEmulator(cfg, logger);
  logger.info(
    { url: emu.url, region: cfg.emulator.region, controlApi: cfg.emulator.controlApi, autoPublish: cfg.emulator.autoPublish.enabled },
    `emulator listening on ${emu.url}`,
  );
  onSignals(logger, () => emu.close(), cfg.shutdownGraceMs);
}

async function runServe(cfg: Config, logger: Logger, configFile: string | undefined): Promise<void> {
  const { startGateway } = await import('./gateway/server');
  let upstreamUrl = cfg.upstreamUrl;
  let stopEmulator: Stopper = async () => {};
  if (!upstreamUrl) {
    // The embedded default: a local emulator with the control API and a synthetic publisher, so a
    // fresh clone shows real results at once.
    const embedded: Config = {
      ...cfg,
      emulator: {
        ...cfg.emulator,
        controlApi: true,
        autoPublish: { ...cfg.emulator.autoPublish, enabled: true },
      },
    };
    const emu = await startEmulator(embedded, logger.child({ component: 'emulator' }));
    upstreamUrl = emu.url;
    stopEmulator = () => emu.close();
    logger.info({ url: emu.url }, `embedded emulator on ${emu.url} (no UPSTREAM_URL configured)`);
  }
  const gw = await startGateway(cfg, logger, upstreamUrl);
  logger.info(
    { url: gw.url, upstream: upstreamUrl, embeddedEmulator: !cfg.upstreamUrl, configFile: configFile ?? 'config/default.json' },
    `gateway listening on ${gw.url} → upstream ${upstreamUrl}`,
  );
  onSignals(
    logger,
    async () => {
      await gw.close();
      await stopEmulator();
    },
    cfg.shutdownGraceMs,
  );
}

/** Splits `[command] [--config FILE] [-h] …rest`: the rest belongs to the command (demo, bench). */
function splitArgs(argv: string[]): { command: string; config?: string; help: boolean; rest: string[] } {
  const rest: string[] = [];
  let command: string | undefined;
  let config: string | undefined;
  let help = false;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--config' || a === '-c') config = argv[++i];
    else if (a.startsWith('--config=')) config = a.slice('--config='.length);
    else if (a === '--help' || a === '-h') help = true;
    else if (command === undefined && !a.startsWith('-')) command = a;
    else rest.push(a);
  }
  return { command: command ?? 'serve', config, help, rest };
}

async function main(argv: string[]): Promise<void> {
  const { command, config, help, rest } = splitArgs(argv);
  if (help) {
    process.stdout.write(USAGE);
    return;
  }
  const values = { config };
  const positionals = [command, ...rest];
  let cfg: Config;
  try {
    cfg = loadConfig({ file: values.config });
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
  const logger = createLogger(cfg.logLevel);
  switch (command) {
    case 'serve':
      return runServe(cfg, logger, values.config);
    case 'emulator':
      return runEmulator(cfg, logger);
    case 'demo': {
      const { runDemo } = await import('./demo');
      return runDemo(cfg, positionals.slice(1));
    }
    case 'bench': {
      const { runBench } = await import('./bench');
      return runBench(cfg, positionals.slice(1));
    }
    default:
      process.stderr.write(USAGE);
      process.exit(2);
  }
}

main(process.argv.slice(2)).catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});

#!/usr/bin/env node
/**
 * CLI: `serve` (the gateway; starts the embedded emulator when no upstream is configured),
 * `emulator` (the emulator alone), `demo` (a legacy terminal client), `conformance` (checks an
 * upstream against what the gateway relies on). The benchmarks are not part of it: `npm run bench`
 * (bench/).
 */
import fs from 'node:fs';
import path from 'node:path';
import { UsageError, parseCommandLine } from './cli';
import { brandOf, brandTokens } from './brand';
import { bootChecks } from './boot-checks';
import { ConfigError, DEFAULT_CONFIG_FILE, configEnvNames, loadConfig } from './config';
import type { Config } from './config';
import type { DemoArgs } from './demo';
import { PortUnavailableError } from './lib/listen';
import { displayUrl } from './lib/display-url';
import { createLogger, logFormat, processDestination } from './lib/logger';
import type { Logger } from './lib/logger';
import { logTraceFields } from './lib/spans';
import { TracingConfigError, startTracing, tracingSettings } from './lib/tracing';
import type { Tracing, TracingSettings } from './lib/tracing';

type Stopper = (graceMs: number) => Promise<void>;

/** A connection drain before the graceful stop (a fleet replica): how long it may hold, and how to end it early. */
interface DrainSignals {
  drainMs: number;
  hurry(): void;
}

/**
 * SIGTERM / SIGINT: a graceful stop that must finish within `graceMs` (after the drain's `drainMs`,
 * if any); the process exits when it has (0), or when that time is over (1). A second signal ends
 * a drain now (what is left is handed over or ended within `graceMs`); without a drain, or at a
 * third signal, the process exits at once.
 */
function onSignals(logger: Logger, stop: Stopper, graceMs: number, drain?: DrainSignals): void {
  let signals = 0;
  let force: NodeJS.Timeout | undefined;
  const exitAfter = (ms: number) => {
    clearTimeout(force);
    force = setTimeout(() => {
      logger.warn({ ms }, 'shutdown time over, exiting');
      process.exit(1);
    }, ms);
    force.unref();
  };
  const handler = (signal: string) => {
    signals++;
    if (signals === 2 && drain) {
      logger.warn({ signal }, 'second signal: ending the drain now');
      drain.hurry();
      return exitAfter(graceMs);
    }
    if (signals > 1) {
      logger.warn({ signal }, 'second signal: exiting now');
      process.exit(1);
    }
    const started = Date.now();
    logger.info(
      { signal, graceMs, drainMs: drain?.drainMs },
      drain
        ? `${signal}: draining connections (up to ${drain.drainMs} ms), then shutting down (grace ${graceMs} ms)`
        : `${signal}: shutting down (grace ${graceMs} ms)`,
    );
    exitAfter((drain?.drainMs ?? 0) + graceMs);
    // Keep a slice of the grace period for what runs after the stop (log flush, exit).
    stop(Math.max(100, graceMs - Math.min(500, graceMs / 10)))
      .then(() => {
        logger.info({ ms: Date.now() - started }, `stopped in ${Date.now() - started} ms`);
        process.exit(0);
      })
      .catch((err: unknown) => {
        logger.error({ err }, 'shutdown failed');
        process.exit(1);
      });
  };
  process.on('SIGTERM', () => handler('SIGTERM'));
  process.on('SIGINT', () => handler('SIGINT'));
}

/** The configuration layers actually read, for the boot log (env names only, never values). */
function configSources(configFile: string | undefined) {
  return {
    files: [...(fs.existsSync(DEFAULT_CONFIG_FILE) ? [DEFAULT_CONFIG_FILE] : []), ...(configFile ? [path.resolve(configFile)] : [])],
    env: configEnvNames(),
  };
}

/**
 * A server's start, where a port it cannot have (in use, or privileged) ends the process with one
 * line naming the port and the setting to change (exit 1), not a stack trace.
 */
async function listening<T>(logger: Logger, start: Promise<T>): Promise<T> {
  try {
    return await start;
  } catch (err) {
    if (!(err instanceof PortUnavailableError)) throw err;
    logger.fatal(err.message);
    process.stderr.write(`${err.message}\n`);
    process.exit(1);
  }
}

async function runEmulator(cfg: Config, logger: Logger, configFile: string | undefined, tracing: Tracing): Promise<void> {
  // Loaded on demand: the emulator brings native modules (sharp, wrtc) a plain gateway never needs.
  const { startEmulator } = await import('./emulator/server');
  const emu = await listening(logger, startEmulator(cfg, logger));
  logger.info(
    {
      url: emu.url,
      port: emu.port,
      region: cfg.emulator.region,
      brand: brandTokens(brandOf(cfg)),
      controlApi: cfg.emulator.controlApi,
      autoPublish: cfg.emulator.autoPublish.enabled,
      config: configSources(configFile),
    },
    `emulator listening on ${emu.url} (region ${cfg.emulator.region})`,
  );
  onSignals(
    logger,
    async () => {
      await emu.close();
      await tracing.shutdown();
    },
    cfg.shutdownGraceMs,
  );
}

/**
 * The Redis store when `store.redisUrl` is set (the gateway then owns no store of its own and this
 * closes it); undefined → the gateway's in-process memory store. Unreachable Redis or an evicting
 * policy ends the process with one clear line (exit 1 / 2), not a stack trace or a retry loop.
 */
async function openStore(cfg: Config, logger: Logger) {
  if (!cfg.store.redisUrl) return undefined;
  const { connectRedisStore, RedisStoreError } = await import('./gateway/store/redis');
  try {
    const store = await connectRedisStore(cfg.store.redisUrl, {
      logger: logger.child({ component: 'redis' }),
      resultWindows: { maxTtlMs: cfg.legacy.resultWindowSeconds * 1000 },
      commitBatchMs: cfg.store.commitBatchMs,
    });
    logger.info({ gatewayId: cfg.store.gatewayId }, 'redis store connected');
    return store;
  } catch (err) {
    if (!(err instanceof RedisStoreError)) throw err;
    logger.fatal(err.message);
    process.stderr.write(`${err.message}\n`);
    process.exit(err.message.startsWith('refusing') ? 2 : 1);
  }
}

async function runServe(
  cfg: Config,
  logger: Logger,
  configFile: string | undefined,
  tracing: Tracing,
  traced: TracingSettings,
): Promise<void> {
  const checks = bootChecks(cfg, process.env);
  for (const w of checks.warnings) logger.warn(w);
  if (checks.refuse) {
    logger.fatal(checks.refuse);
    process.stderr.write(`${checks.refuse}\n`);
    process.exit(2);
  }
  const store = await openStore(cfg, logger);
  const { startGateway } = await import('./gateway/server');
  let upstreamUrl = cfg.upstreamUrl;
  let emulator: { url: string; port: number; controlApi: boolean; autoPublish: boolean } | undefined;
  let stopEmulator = async () => {};
  if (!upstreamUrl) {
    // The embedded default: a local emulator, by default with the control API and a synthetic publisher.
    const { startEmulator, embeddedEmulatorConfig } = await import('./emulator/server');
    const embedded = embeddedEmulatorConfig(cfg);
    const emu = await listening(logger, startEmulator(embedded, logger.child({ component: 'emulator' })));
    upstreamUrl = emu.url;
    stopEmulator = () => emu.close();
    emulator = {
      url: emu.url,
      port: emu.port,
      controlApi: embedded.emulator.controlApi === true,
      autoPublish: embedded.emulator.autoPublish.enabled === true,
    };
  }
  const gw = await listening(logger, startGateway(cfg, logger, upstreamUrl, { store }));
  const sources = configSources(configFile);
  logger.info(
    {
      url: gw.url,
      port: gw.port,
      upstream: displayUrl(upstreamUrl),
      embeddedEmulator: emulator ?? null,
      config: sources,
      brand: brandTokens(brandOf(cfg)),
      legacyLeaseSeconds: cfg.legacy.leaseTtlSeconds,
      deprecation: cfg.deprecation,
      metrics: cfg.telemetry.metrics ? '/metrics' : null,
      // Where /metrics listens when `telemetry.metricsPort` moves it off the gateway's port.
      metricsUrl: gw.metricsUrl ?? null,
      adminReport: cfg.admin.token ? '/admin/deprecation' : null,
      shutdownGraceMs: cfg.shutdownGraceMs,
      store: cfg.store.redisUrl ? 'redis' : 'memory',
      storeUrl: cfg.store.redisUrl ? displayUrl(cfg.store.redisUrl) : null,
      gatewayId: cfg.store.gatewayId,
      // A fleet member (heartbeat, failover, drain handover) when a secret is configured.
      fleet: !gw.gateway.fleet.solo,
      tracing: traced.enabled ? { protocol: traced.protocol, endpoint: traced.endpoint, sampler: traced.sampler } : null,
    },
    [
      `gateway listening on ${gw.url} (port ${gw.port})`,
      `upstream ${displayUrl(upstreamUrl)}` +
        (emulator
          ? ` = embedded emulator (no UPSTREAM_URL configured; control API ${emulator.controlApi ? 'on' : 'off'}, ` +
            `synthetic publisher ${emulator.autoPublish ? 'on' : 'off'})`
          : ''),
      `config ${sources.files.join(' + ') || '(defaults only)'}${sources.env.length ? ` + env ${sources.env.join(', ')}` : ''}`,
    ].join('; '),
  );
  // A fleet replica drains its connections first; alone, nobody could take its streams over.
  const drainMs = cfg.server.drainTimeoutMs;
  onSignals(
    logger,
    async (graceMs) => {
      await gw.drainAndClose(drainMs, graceMs);
      await store?.close();
      await stopEmulator();
      // Last: the spans of the shutdown itself are exported too.
      await tracing.shutdown();
    },
    cfg.shutdownGraceMs,
    gw.gateway.fleet.solo ? undefined : { drainMs, hurry: () => gw.hurry() },
  );
}

/** The version in package.json beside dist/ (the image has it), for `service.version`; undefined where there is none. */
function packageVersion(): string | undefined {
  try {
    const pkg = JSON.parse(fs.readFileSync(path.join(__dirname, '..', 'package.json'), 'utf8')) as { name?: string; version?: string };
    return pkg.name === 'legacy-gateway' ? pkg.version : undefined;
  } catch {
    return undefined;
  }
}

async function main(argv: string[]): Promise<void> {
  let parsed;
  try {
    parsed = parseCommandLine(argv);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    process.stderr.write(`${err.message}\n`);
    process.exit(2);
  }
  if (parsed.kind === 'help') {
    process.stdout.write(parsed.text);
    return;
  }
  if (parsed.kind === 'version') {
    process.stdout.write(`legacy-gateway ${packageVersion() ?? '(version unknown: no package.json beside dist/)'}\n`);
    return;
  }
  const { command, config } = parsed;
  let cfg: Config;
  try {
    cfg = loadConfig({ file: config });
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
  // Read before anything is logged: the logger stamps trace ids on its lines only when tracing is on.
  let traced: TracingSettings = { enabled: false, why: 'the demo client is not traced' };
  if (command !== 'demo') {
    try {
      traced = tracingSettings(process.env);
    } catch (err) {
      if (!(err instanceof TracingConfigError)) throw err;
      process.stderr.write(`${err.message}\n`);
      process.exit(2);
    }
  }
  const format = logFormat({ logPretty: cfg.logPretty, isTTY: process.stdout.isTTY, nodeEnv: process.env.NODE_ENV });
  const logger = createLogger(cfg.logLevel, 'gateway', processDestination(format), traced.enabled ? { mixin: logTraceFields } : {});
  // Before the gateway or the emulator is imported (below, on demand): the instrumentations must
  // be in place when express and ioredis are first required.
  const tracing = await startTracing(traced, {
    serviceName: command === 'emulator' ? 'legacy-gateway-emulator' : 'legacy-gateway',
    replicaId: cfg.store.gatewayId,
    version: packageVersion(),
    logger,
  });
  switch (command) {
    case 'serve':
      return runServe(cfg, logger, config, tracing, traced);
    case 'emulator':
      return runEmulator(cfg, logger, config, tracing);
    case 'demo': {
      const { runDemo } = await import('./demo');
      return runDemo(cfg, parsed.values as unknown as DemoArgs);
    }
    case 'conformance': {
      const { runConformanceCommand } = await import('./conformance/command');
      const code = await runConformanceCommand(cfg, parsed.values, process.env);
      // Explicitly: a keep-alive socket or the pattern publisher's worker left by a check must not hold the process.
      process.exit(code);
    }
  }
}

main(process.argv.slice(2)).catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});

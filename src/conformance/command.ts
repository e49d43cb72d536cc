/**
 * `conformance`: the kit from the command line. The report goes to stdout (logs to stderr); the
 * exit status is 0 when every check that ran passed, 1 on a failure, 2 on missing arguments and
 * 130 when interrupted. Ctrl-C (SIGINT) or SIGTERM stops the run and deletes its stream; a second
 * signal exits at once.
 */
import pino from 'pino';
import { brandOf } from '../brand';
import type { Config } from '../config';
import { skipList } from '../cli';
import { createLogger } from '../lib/logger';
import { isCheckId } from './checks';
import { formatReport } from './report';
import { runConformance } from './run';
import type { PublishMode } from './run';

export async function runConformanceCommand(
  cfg: Config,
  values: Record<string, string | boolean | undefined>,
  env: NodeJS.ProcessEnv,
): Promise<number> {
  const upstreamUrl = (typeof values.upstream === 'string' ? values.upstream : undefined) ?? cfg.upstreamUrl;
  const apiKey = (typeof values.key === 'string' ? values.key : undefined) ?? env.API_KEY;
  if (!upstreamUrl || !apiKey) {
    process.stderr.write(
      `legacy-gateway conformance: give ${!upstreamUrl ? '--upstream URL (or UPSTREAM_URL)' : '--key KEY (or API_KEY)'}\n`,
    );
    return 2;
  }
  try {
    new URL(upstreamUrl);
  } catch {
    process.stderr.write(`legacy-gateway conformance: --upstream is not a URL: ${upstreamUrl}\n`);
    return 2;
  }
  // stdout is the report: rtc-node (loaded if the kit publishes frames) logs there unless NODE_ENV=production.
  process.env.NODE_ENV = 'production';
  const logger = createLogger(cfg.logLevel, 'conformance', pino.destination({ dest: 2, sync: true }));
  const brand = brandOf(cfg);
  const out = (line: string) => process.stdout.write(`${line}\n`);

  const abort = new AbortController();
  let signals = 0;
  const onSignal = (signal: NodeJS.Signals) => {
    if (++signals > 1) process.exit(130);
    out(`${signal}: stopping; the stream is deleted before exit (again to exit at once)`);
    abort.abort(new Error(`interrupted by ${signal}`));
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);

  out(
    `conformance of ${upstreamUrl} (reference scheme ${brand.scheme}://, key prefix ${brand.keyPrefix}, ` +
      `region header ${brand.regionHeaderDisplay}, room ${brand.room})`,
  );
  const report = await runConformance({
    upstreamUrl,
    apiKey,
    brand,
    model: typeof values.model === 'string' ? values.model : undefined,
    publish: values.publish as PublishMode,
    frameTimeoutMs: Number(values['frame-timeout']) * 1000,
    skip: skipList(values.skip).filter(isCheckId),
    signal: abort.signal,
    logger,
    onProgress: (line) => out(`· ${line}`),
  });
  out('');
  process.stdout.write(formatReport(report));
  if (report.interrupted) return 130;
  return report.ok ? 0 : 1;
}

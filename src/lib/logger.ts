import pino from 'pino';
import type { Logger } from 'pino';
import { PinoPretty } from 'pino-pretty';
import { prettyMessage } from './pretty-log';

export type { Logger };

/**
 * Paths redacted on every log line: keys and tokens must never reach the logs
 * (a test greps a full run's logs for the test keys).
 */
export const REDACT_PATHS = [
  'req.headers.authorization',
  'req.headers.cookie',
  'headers.authorization',
  'authorization',
  'api_key',
  'apiKey',
  'token',
  'publishToken',
  '*.api_key',
  '*.apiKey',
  '*.token',
  '*.authorization',
  'publish.token',
  '*.publish.token',
];

/**
 * The time on every log line, the gateway's and the emulator's: ISO 8601 in UTC
 * (`"time":"2026-11-25T06:29:30.048Z"`), exactly as pino's `isoTime` writes it. The date and time
 * to the second are formatted once a second and each line adds its milliseconds: a `Date` and its
 * ISO string for every line were a measurable part of a proxied request's access line.
 */
export const LOG_TIME = isoTimeBySecond();

/** Set while `atLogTime` writes: the time its lines carry instead of now. */
let pinnedMs: number | undefined;

/**
 * Runs `write` with every line it logs dated `epochMs` (wall-clock ms) instead of now: for a line
 * written a little after what it records, so it still says when that happened (the batched
 * passthrough access lines).
 */
export function atLogTime(epochMs: number, write: () => void): void {
  const outer = pinnedMs;
  pinnedMs = Math.floor(epochMs);
  try {
    write();
  } finally {
    pinnedMs = outer;
  }
}

function isoTimeBySecond(): () => string {
  let second = NaN;
  let head = '';
  return () => {
    const now = pinnedMs ?? Date.now();
    const s = Math.floor(now / 1000);
    if (s !== second) {
      second = s;
      // "2026-11-25T06:29:30.000Z" less its "000Z".
      head = `,"time":"${new Date(s * 1000).toISOString().slice(0, -4)}`;
    }
    const ms = now - s * 1000;
    return `${head}${ms < 10 ? '00' : ms < 100 ? '0' : ''}${ms}Z"`;
  };
}

/** Log output is written in chunks of at least this many bytes, and at least this often. */
const LOG_CHUNK_BYTES = 4096;
const LOG_FLUSH_MS = 100;

let stdout: pino.DestinationStream | undefined;

/**
 * The process's standard output as a log destination, one per process: lines are gathered into
 * chunks of LOG_CHUNK_BYTES (one write each), written at least every LOG_FLUSH_MS, and what is
 * left is written synchronously when the process exits.
 */
export function stdoutDestination(): pino.DestinationStream {
  if (stdout) return stdout;
  const dest = pino.destination({ dest: 1, sync: true, minLength: LOG_CHUNK_BYTES, periodicFlush: LOG_FLUSH_MS });
  process.once('exit', () => {
    try {
      dest.flushSync();
    } catch {
      // Standard output already closed: nothing can be written any more.
    }
  });
  return (stdout = dest);
}

export type LogFormat = 'pretty' | 'json';

/**
 * How the process's log lines look: pretty (pino-pretty, for a person at a terminal) when
 * `LOG_PRETTY=true` (`logPretty`), JSON when it is false; unset, pretty only when standard output
 * is a terminal outside production, so a container, a pipe or a file always gets one JSON object a
 * line, as log collectors expect.
 */
export function logFormat(input: { logPretty?: boolean; isTTY?: boolean; nodeEnv?: string }): LogFormat {
  if (input.logPretty !== undefined) return input.logPretty ? 'pretty' : 'json';
  return input.isTTY === true && input.nodeEnv !== 'production' ? 'pretty' : 'json';
}

/**
 * Standard output for a person: one coloured line per entry (colours on a terminal only), its
 * fields on the same line (`prettyMessage`: an access line is one line, the boot line a short
 * summary, a stack below its line); written synchronously (a terminal is not a throughput path).
 */
export function prettyDestination(colorize: boolean, destination: number | NodeJS.WritableStream = 1): pino.DestinationStream {
  return PinoPretty({
    colorize,
    sync: true,
    destination,
    ignore: 'pid,hostname,service',
    translateTime: 'SYS:HH:MM:ss.l',
    hideObject: true,
    messageFormat: (log, messageKey) => prettyMessage(log, messageKey),
  });
}

/** The process's standard output in `format` (src/main.ts: `logFormat` of the configuration and the terminal). */
export function processDestination(format: LogFormat): pino.DestinationStream {
  return format === 'pretty' ? prettyDestination(process.stdout.isTTY === true) : stdoutDestination();
}

export interface LoggerOptions {
  /** Extra fields of every line (a pino mixin): the active trace's ids while tracing is on. */
  mixin?: () => Record<string, unknown>;
}

/** A logger writing to `destination`, by default the process's buffered standard output. */
export function createLogger(
  level: string,
  name = 'gateway',
  destination: pino.DestinationStream = stdoutDestination(),
  opts: LoggerOptions = {},
): Logger {
  return pino(
    {
      name,
      level,
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
      base: { service: name },
      timestamp: LOG_TIME,
      ...(opts.mixin ? { mixin: opts.mixin } : {}),
    },
    destination,
  );
}

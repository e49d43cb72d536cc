import pino from 'pino';
import type { Logger } from 'pino';

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

export function createLogger(level: string, name = 'gateway', destination?: pino.DestinationStream): Logger {
  return pino(
    {
      name,
      level,
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
      base: { service: name },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    destination,
  );
}

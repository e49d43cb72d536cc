/**
 * The command line: one strict `node:util` parseArgs per subcommand, so a mistyped flag is refused
 * (exit 2) instead of being silently ignored, and `<command> --help` prints that command's flags.
 */
import { parseArgs } from 'node:util';
import type { ParseArgsConfig } from 'node:util';
import { CHECK_IDS, isCheckId } from './conformance/checks';
import { environmentHelp, wrapWords } from './env-help';
import type { EnvUse } from './env-help';

type Options = NonNullable<ParseArgsConfig['options']>;

interface CommandSpec {
  summary: string;
  usage: string;
  /** Help lines of the command's own flags and arguments. */
  flags?: string;
  /** Lines printed after the flags. */
  notes?: string;
  /** The environment variables it reads, listed in its help. */
  env: EnvUse;
  options: Options;
}

const COMMON: Options = {
  config: { type: 'string', short: 'c' },
  help: { type: 'boolean', short: 'h' },
  version: { type: 'boolean', short: 'v' },
};
const COMMON_HELP = `  -c, --config FILE   JSON config layered over config/default.json (docs/configuration.md)
  -h, --help          this help
  -v, --version       print the version and exit`;

function oneOf(...keys: string[]): (key: string) => boolean {
  return (key) => keys.includes(key);
}
const BRAND = ['brand', 'brandAbbreviation', 'thirdPartyBackend', 'roomVendor'];
/** The timeouts every HTTP server here takes (src/lib/http-server.ts). */
const SERVER_TIMEOUTS = ['server.headersTimeoutMs', 'server.requestTimeoutMs', 'server.keepAliveTimeoutMs', 'server.idleTimeoutMs'];
const NODE_ENV: [string, string] = ['NODE_ENV', 'production: JSON logs and the production defaults and checks (docs/configuration.md)'];
const TRACING: [string, string] = ['OTEL_*', 'tracing, off unless OTEL_EXPORTER_OTLP_ENDPOINT is set (docs/configuration.md "Tracing")'];

export const COMMANDS = {
  serve: {
    summary: 'run the gateway (with the embedded emulator unless UPSTREAM_URL is set; in production only with EMULATOR_EMBEDDED=true)',
    usage: 'serve [--config FILE]',
    // The embedded emulator reads the emulator's variables too.
    env: { keys: () => true, own: [NODE_ENV, TRACING] },
    options: COMMON,
  },
  emulator: {
    summary: 'run the /v1beta + /billing emulator alone',
    usage: 'emulator [--config FILE]',
    env: {
      keys: (k) => k.startsWith('emulator.') || oneOf('logLevel', 'logPretty', 'shutdownGraceMs', ...BRAND, ...SERVER_TIMEOUTS)(k),
      own: [NODE_ENV, TRACING],
    },
    options: COMMON,
  },
  demo: {
    summary: 'a legacy /v0.2 terminal client against a running gateway',
    usage: 'demo [--url URL] [--key KEY] [--mode clip|frame] [--model ID] [--prompt TEXT] [--seconds N] [--config FILE]',
    flags: `  --url URL           gateway base URL (default GATEWAY_URL, else the configured host and port)
  --key KEY           API key (default API_KEY, else the shipped dev key)
  --mode clip|frame   processing mode (default clip)
  --model ID          model (default local/analyzer)
  --prompt TEXT       prompt
  --seconds N         stop after N seconds (default 0: until Ctrl-C)`,
    env: {
      // The default URL and dev key.
      keys: oneOf('port', 'host', 'brand', 'brandAbbreviation'),
      own: [
        ['GATEWAY_URL', 'gateway base URL, when --url is not given'],
        ['API_KEY', 'API key, when --key is not given'],
      ],
    },
    options: {
      ...COMMON,
      url: { type: 'string' },
      key: { type: 'string' },
      mode: { type: 'string', default: 'clip' },
      model: { type: 'string', default: 'local/analyzer' },
      prompt: { type: 'string', default: 'What is happening in the video?' },
      seconds: { type: 'string', default: '0' },
    },
  },
  conformance: {
    summary: 'check that a /v1beta + /billing upstream does everything the gateway relies on (one stream, at most 10 completions)',
    usage:
      'conformance --upstream URL --key KEY [--model ID] [--publish auto|always|never] [--frame-timeout S] [--skip IDS] [--config FILE]',
    flags: `  --upstream URL      the upstream's base URL (default: the configured upstreamUrl)
  --key KEY           API key of the account to test with (default API_KEY); it is billed
  --model ID          model to ask (default: the first ready one listed)
  --publish MODE      how the stream gets frames: auto (the upstream's own publisher, else after 5 s
                      a test pattern the kit publishes into the room), always, never (default auto)
  --frame-timeout S   how long to wait for the first frames (default 30)
  --skip IDS          checks not to run, comma-separated (reported as skipped)`,
    notes: `Exit status: 0 every check that ran passed, 1 a check failed, 2 a bad command line, 130 interrupted.
The checks and what they cost: docs/operations.md "Switching from the emulator to the provider".`,
    env: { keys: oneOf('upstreamUrl', 'logLevel', ...BRAND), own: [['API_KEY', 'API key, when --key is not given'], TRACING] },
    options: {
      ...COMMON,
      upstream: { type: 'string' },
      key: { type: 'string' },
      model: { type: 'string' },
      publish: { type: 'string', default: 'auto' },
      'frame-timeout': { type: 'string', default: '30' },
      skip: { type: 'string', default: '' },
    },
  },
} satisfies Record<string, CommandSpec>;

export type CommandName = keyof typeof COMMANDS;

const NAME = 'legacy-gateway';

export const USAGE = `usage: ${NAME} <${Object.keys(COMMANDS).join('|')}> [options]

${Object.entries(COMMANDS)
  .map(([name, c]) => wrapWords(`  ${name.padEnd(11)} `, c.summary.split(' '), 15))
  .join('\n')}

Run '${NAME} <command> --help' for a command's options and environment. No command: serve.
'${NAME} --version' prints the version.
`;

/** `usage: legacy-gateway <usage>`, an option group never split, continued lines under the first option. */
function usageLine(usage: string): string {
  const [command = '', ...options] = usage.match(/\[[^\]]*\]|\S+/g) ?? [];
  return wrapWords(`usage: ${NAME}`, [command, ...options], `usage: ${NAME} ${command} `.length);
}

export function commandHelp(name: CommandName): string {
  const c: CommandSpec = COMMANDS[name];
  return [
    `${usageLine(c.usage)}\n\n${c.summary}\n`,
    `${c.flags ? `${c.flags}\n` : ''}${COMMON_HELP}\n`,
    ...(c.notes ? [`${c.notes}\n`] : []),
    environmentHelp(c.env),
  ].join('\n');
}

/** A command line the CLI refuses: the message to print, exit code 2. */
export class UsageError extends Error {
  override name = 'UsageError';
}

export type Parsed =
  | { kind: 'help'; text: string }
  | { kind: 'version' }
  | { kind: 'run'; command: CommandName; config?: string; values: Record<string, string | boolean | undefined> };

function isCommand(name: string): name is CommandName {
  return Object.hasOwn(COMMANDS, name);
}

/** Parses argv (without node and the script); throws `UsageError` on anything it does not know. */
export function parseCommandLine(argv: string[]): Parsed {
  const first = argv[0];
  if (first === '--help' || first === '-h') return { kind: 'help', text: USAGE };
  let command: CommandName = 'serve';
  let rest = argv;
  if (first !== undefined && !first.startsWith('-')) {
    if (!isCommand(first)) throw new UsageError(`unknown command '${first}'\n\n${USAGE}`);
    command = first;
    rest = argv.slice(1);
  }
  const spec: CommandSpec = COMMANDS[command];
  let parsed;
  try {
    parsed = parseArgs({ args: rest, options: spec.options, allowPositionals: false, strict: true });
  } catch (err) {
    throw new UsageError(`${NAME} ${command}: ${(err as Error).message}\nRun '${NAME} ${command} --help' for its options.`);
  }
  const values = parsed.values as Record<string, string | boolean | undefined>;
  if (values.help) return { kind: 'help', text: commandHelp(command) };
  if (values.version) return { kind: 'version' };
  if (command === 'demo') {
    if (values.mode !== 'clip' && values.mode !== 'frame')
      throw new UsageError(`${NAME} demo: --mode must be clip or frame, got '${String(values.mode)}'`);
    const seconds = Number(values.seconds);
    if (!Number.isFinite(seconds) || seconds < 0)
      throw new UsageError(`${NAME} demo: --seconds must be a number >= 0, got '${String(values.seconds)}'`);
  }
  if (command === 'conformance') checkConformanceFlags(values);
  return { kind: 'run', command, config: values.config as string | undefined, values };
}

function checkConformanceFlags(values: Record<string, string | boolean | undefined>): void {
  const publish = values.publish;
  if (publish !== 'auto' && publish !== 'always' && publish !== 'never')
    throw new UsageError(`${NAME} conformance: --publish must be auto, always or never, got '${String(publish)}'`);
  const timeout = Number(values['frame-timeout']);
  if (!Number.isFinite(timeout) || timeout <= 0)
    throw new UsageError(`${NAME} conformance: --frame-timeout must be a number of seconds > 0, got '${String(values['frame-timeout'])}'`);
  const unknown = skipList(values.skip).filter((id) => !isCheckId(id));
  if (unknown.length)
    throw new UsageError(`${NAME} conformance: --skip names no check: ${unknown.join(', ')} (checks: ${CHECK_IDS.join(', ')})`);
}

/** The ids of `--skip a,b`. */
export function skipList(value: string | boolean | undefined): string[] {
  return typeof value === 'string'
    ? value
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean)
    : [];
}

/**
 * The environment section of a command's `--help`. The configuration variables come from the
 * config loader's own map (`configEnvVars`), so the list names exactly what is read; each command
 * picks the config keys it uses, and names the few variables it reads itself.
 */
import { configEnvVars } from './config';

/** What a command reads from the environment. */
export interface EnvUse {
  /** The config keys (`emulator.port`) whose variables the command reads. */
  keys: (key: string) => boolean;
  /** Variables outside the config, with what each does. */
  own?: [name: string, what: string][];
}

/** Groups of the config variables, by the key they set; the first that matches holds a variable. */
const GROUPS: { title: string; holds: (key: string) => boolean }[] = [
  {
    title: 'logs, brand',
    holds: (k) => ['logLevel', 'logPretty', 'brand', 'brandAbbreviation', 'thirdPartyBackend', 'roomVendor'].includes(k),
  },
  { title: 'HTTP server', holds: (k) => k.startsWith('server.') || k.startsWith('cors.') },
  { title: 'legacy /v0.2', holds: (k) => k.startsWith('legacy.') },
  { title: 'deprecation', holds: (k) => k.startsWith('deprecation.') || k.startsWith('admin.') },
  { title: 'telemetry', holds: (k) => k.startsWith('telemetry.') },
  { title: 'store, fleet', holds: (k) => k.startsWith('store.') },
  { title: 'emulator', holds: (k) => k.startsWith('emulator.') },
];
/** Where every other variable goes (the top-level keys: port, host, upstreamUrl, shutdown…); listed first. */
const REST = 'general';

const WIDTH = 100;
const INDENT = 2;
const COLUMN = 22;

/**
 * `first`, then `words` each after a space, wrapped at `width`: a line that would run past it
 * goes on the next, which starts its first word at column `indent`.
 */
export function wrapWords(first: string, words: string[], indent: number, width = WIDTH): string {
  const lines = [first];
  let placed = 0;
  for (const word of words) {
    if (placed > 0 && lines[lines.length - 1]!.length + 1 + word.length > width) {
      lines.push(' '.repeat(indent - 1));
      placed = 0;
    }
    lines[lines.length - 1] += ` ${word}`;
    placed++;
  }
  return lines.join('\n');
}

/** `label` in the first column, then `words` from COLUMN on. */
const row = (label: string, words: string[]) => wrapWords(' '.repeat(INDENT) + label.padEnd(COLUMN - INDENT - 1), words, COLUMN);

/** The config variables a command reads, grouped: [title, names][] in the order shown. */
export function configVarsOf(use: EnvUse): [title: string, names: string[]][] {
  const groups = new Map<string, string[]>([[REST, []], ...GROUPS.map((g): [string, string[]] => [g.title, []])]);
  for (const { name, key } of configEnvVars()) {
    if (!use.keys(key)) continue;
    groups.get(GROUPS.find((g) => g.holds(key))?.title ?? REST)!.push(name);
  }
  return [...groups].filter(([, names]) => names.length > 0);
}

/** The help's environment sections: the command's own variables, then the config variables it reads. */
export function environmentHelp(use: EnvUse): string {
  const sections: string[] = [];
  if (use.own?.length) sections.push(['Environment:', ...use.own.map(([name, what]) => row(name, what.split(' ')))].join('\n'));
  const groups = configVarsOf(use);
  if (groups.length) {
    sections.push(
      [
        'Config variables (each overrides its key in the config file; docs/configuration.md):',
        ...groups.map(([title, names]) =>
          row(
            title,
            names.map((n, i) => (i < names.length - 1 ? `${n},` : n)),
          ),
        ),
      ].join('\n'),
    );
  }
  return sections.map((s) => `${s}\n`).join('\n');
}

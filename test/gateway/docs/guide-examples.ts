/**
 * The migration guide's TypeScript examples as a customer copies them: each ```ts block of the
 * served guide is a whole program, or a snippet whose first line says it goes in the program above
 * ("// In the program above: …"), which is then read appended to that program.
 */
import fs from 'node:fs';
import path from 'node:path';
import MarkdownIt from 'markdown-it';
import { brandOf } from '../../../src/brand';
import type { Config } from '../../../src/config';
import { deployedGuide } from '../../../src/gateway/docs/guide';
import { ROOT } from '../../helpers/util';

export const NEUTRAL_GUIDE = fs.readFileSync(path.join(ROOT, 'docs', 'migration.md'), 'utf8');
export const PROVIDER_PROFILE = path.join(ROOT, 'config', 'overshoot.json');
const CONTINUES = '// In the program above:';

export interface Example {
  /** Where it comes from, for failure messages: the profile and its line in the guide. */
  label: string;
  code: string;
  /** A snippet, appended to the program before it. */
  continues: boolean;
}

/** The guide as the gateway configured by `cfg` serves it (with `publicUrl` as its base URL when given). */
export function servedGuide(cfg: Config, publicUrl = cfg.publicUrl): string {
  return deployedGuide(NEUTRAL_GUIDE, { brand: brandOf(cfg), deprecation: cfg.deprecation, publicUrl });
}

/** The guide's ```ts blocks: whole programs, and snippets joined to the program before them. */
export function typescriptExamples(markdown: string, profile: string): Example[] {
  const out: Example[] = [];
  let program: string | undefined;
  for (const token of new MarkdownIt().parse(markdown, {})) {
    if (token.type !== 'fence' || token.info.trim() !== 'ts') continue;
    const label = `${profile}, guide line ${(token.map?.[0] ?? 0) + 1}`;
    if (token.content.startsWith(CONTINUES)) {
      if (program === undefined) throw new Error(`${label}: a snippet "in the program above" with no program above it`);
      out.push({ label: `${label} (appended to the program above)`, code: `${program}\n${token.content}`, continues: true });
    } else {
      program = token.content;
      out.push({ label, code: program, continues: false });
    }
  }
  return out;
}

/** `npm run bench`: every benchmark section, printing figures (never asserting timings). */
import type { Config } from './config';

type Section = (cfg: Config) => Promise<void>;

const SECTIONS: Record<string, () => Promise<Section>> = {};

export function registerSection(name: string, load: () => Promise<Section>): void {
  SECTIONS[name] = load;
}

export async function runBench(cfg: Config, only: string[]): Promise<void> {
  const names = only.length ? only : Object.keys(SECTIONS);
  for (const name of names) {
    const load = SECTIONS[name];
    if (!load) {
      console.error(`unknown bench section ${name}; known: ${Object.keys(SECTIONS).join(', ')}`);
      process.exitCode = 2;
      continue;
    }
    console.log(`\n== ${name} ==`);
    await (await load())(cfg);
  }
  // wrtc/rtc-node handles may keep the loop alive; the figures are printed, so leave.
  process.exit(process.exitCode ?? 0);
}

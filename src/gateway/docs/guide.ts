/**
 * The migration guide in the deployment's own words. `docs/migration.md` is written with the
 * contract's neutral names (`svc://`, `svc-` keys, `X-Svc-Region`, the `room` vendor, the shipped
 * deprecation dates, a placeholder base URL) so it reads the same in the repository; a customer
 * copying an example must get the names their account answers to. The rewrite is a closed table of
 * literal tokens, each one chosen where it is an interface name (never the English word "room").
 */
import { brandOf } from '../../brand';
import type { Brand } from '../../brand';
import type { DeprecationConfig } from '../../config';
import { DEFAULT_DEPRECATION } from '../../config';
import { deprecationHeaders } from '../telemetry/deprecation';

/** The names the guide is written with: the contract's neutral tokens (spec/interface.md). */
export const NEUTRAL_BRAND: Brand = brandOf({ brand: 'svc', roomVendor: 'room' });

/** The base URL the guide's examples use where the deployment names none (`publicUrl`). */
export const PLACEHOLDER_BASE_URL = 'https://your-gateway.example.com';

export interface GuideDeployment {
  brand: Brand;
  deprecation: Pick<DeprecationConfig, 'date' | 'sunset'>;
  /** The gateway's public base URL (`publicUrl`); the placeholder stays when unset. */
  publicUrl?: string | undefined;
}

export interface Substitution {
  neutral: string;
  deployed: string;
}

/** `<!-- neutral-only -->…<!-- /neutral-only -->`: words true only while the deployment uses the neutral names. */
const NEUTRAL_ONLY = /<!-- neutral-only -->([\s\S]*?)<!-- \/neutral-only -->/g;
const ANY_MARKER = /<!-- \/?neutral-only -->/;

/** API-key variable of the examples: `SVC_API_KEY` → `OVS_API_KEY` (the abbreviation, as keys carry it). */
const keyVariable = (b: Brand) => `${b.scheme.toUpperCase()}_API_KEY`;

/**
 * Every token the rendering replaces, neutral → deployed. Built from both brands' derivations
 * (src/brand.ts), so a token can only be one the interface really carries. The vendor tokens are
 * written with their syntax (`type: 'room'`, `room: {url, token}`) because the bare word is also
 * English ("your room", "a room client").
 */
export function guideSubstitutions(d: GuideDeployment): Substitution[] {
  const n = NEUTRAL_BRAND;
  const b = d.brand;
  const neutralHeaders = deprecationHeaders({ ...DEFAULT_DEPRECATION, link: '' });
  const headers = deprecationHeaders({ ...d.deprecation, link: '' });
  return [
    { neutral: `${n.scheme}://`, deployed: `${b.scheme}://` },
    { neutral: n.keyPrefix, deployed: b.keyPrefix },
    { neutral: keyVariable(n), deployed: keyVariable(b) },
    { neutral: n.regionHeaderDisplay, deployed: b.regionHeaderDisplay },
    { neutral: `${n.responseField}.cache`, deployed: `${b.responseField}.cache` },
    { neutral: `backend: '${n.backend}'`, deployed: `backend: '${b.backend}'` },
    { neutral: `'${n.thirdPartyBackend}'`, deployed: `'${b.thirdPartyBackend}'` },
    { neutral: `type: '${n.room}'`, deployed: `type: '${b.room}'` },
    { neutral: `${n.room}: {url, token}`, deployed: `${b.room}: {url, token}` },
    { neutral: n.roomTokenField, deployed: b.roomTokenField },
    { neutral: `Deprecation: ${neutralHeaders.deprecation}`, deployed: `Deprecation: ${headers.deprecation}` },
    { neutral: `Sunset: ${neutralHeaders.sunset}`, deployed: `Sunset: ${headers.sunset}` },
    { neutral: PLACEHOLDER_BASE_URL, deployed: d.publicUrl?.replace(/\/+$/, '') ?? PLACEHOLDER_BASE_URL },
  ];
}

/** True when every name of the deployment is the neutral one (the repository's own wording holds). */
export function usesNeutralNames(brand: Brand): boolean {
  return (Object.keys(NEUTRAL_BRAND) as (keyof Brand)[]).every((k) => brand[k] === NEUTRAL_BRAND[k]);
}

const escapeRegExp = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
const WORD = /\w/;

/**
 * One pass over the text with every token at once (longest first), so a deployed value is never
 * rewritten again; a token that starts or ends with a word character must not touch another one
 * there (`svc-` inside `xsvc-` stays).
 */
function substitute(text: string, table: Substitution[]): string {
  const changed = table.filter((s) => s.neutral !== s.deployed);
  if (changed.length === 0) return text;
  const byToken = new Map(changed.map((s) => [s.neutral, s.deployed]));
  const alternatives = [...byToken.keys()]
    .sort((a, b) => b.length - a.length)
    .map((t) => `${WORD.test(t[0]!) ? '(?<!\\w)' : ''}${escapeRegExp(t)}${WORD.test(t[t.length - 1]!) ? '(?!\\w)' : ''}`);
  return text.replace(new RegExp(alternatives.join('|'), 'g'), (m) => byToken.get(m)!);
}

/** A guide whose deployment-only markers are malformed. */
export class GuideMarkupError extends Error {
  override name = 'GuideMarkupError';
}

/**
 * The guide as this deployment's customers read it: neutral-only regions kept (markers dropped)
 * when the deployment uses the neutral names, dropped whole otherwise; then the token table.
 */
export function deployedGuide(neutralText: string, d: GuideDeployment): string {
  const neutral = usesNeutralNames(d.brand);
  const regionsDone = neutralText.replace(NEUTRAL_ONLY, (_m, inner: string) => (neutral ? inner : ''));
  if (ANY_MARKER.test(regionsDone)) throw new GuideMarkupError('the migration guide has an unpaired <!-- neutral-only --> marker');
  return substitute(regionsDone, guideSubstitutions(d));
}

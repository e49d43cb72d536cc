/**
 * The migration guide in a deployment's words: the token table against the real docs/migration.md,
 * under the provider's profile and under the neutral default.
 */
import fs from 'node:fs';
import path from 'node:path';
import { brandOf } from '../../../src/brand';
import { loadConfig } from '../../../src/config';
import type { Config } from '../../../src/config';
import {
  deployedGuide,
  GuideMarkupError,
  guideSubstitutions,
  NEUTRAL_BRAND,
  PLACEHOLDER_BASE_URL,
  usesNeutralNames,
} from '../../../src/gateway/docs/guide';
import { deprecationHeaders } from '../../../src/gateway/telemetry/deprecation';
import { ROOT } from '../../helpers/util';

const NEUTRAL_GUIDE = fs.readFileSync(path.join(ROOT, 'docs', 'migration.md'), 'utf8');
const PROVIDER_PROFILE = path.join(ROOT, 'config', 'overshoot.json');
const DATES = { date: '2026-03-01T00:00:00Z', sunset: '2027-01-31T00:00:00Z' };

const deploymentOf = (cfg: Config) => ({ brand: brandOf(cfg), deprecation: cfg.deprecation, publicUrl: cfg.publicUrl });
const withoutMarkers = (text: string) => text.replace(/<!-- \/?neutral-only -->/g, '');

describe('under the provider profile (config/overshoot.json)', () => {
  const cfg = loadConfig({
    env: { PUBLIC_URL: 'https://gateway.customer.example/' },
    file: PROVIDER_PROFILE,
    overrides: { deprecation: DATES },
  });
  const guide = deployedGuide(NEUTRAL_GUIDE, deploymentOf(cfg));

  test('no neutral name is left: scheme, key prefix, key variable, region header, response field, vendor tokens', () => {
    for (const neutral of [
      'svc://',
      'svc-',
      'X-Svc',
      'SVC_',
      'svc.',
      "'room'",
      '"room"',
      'room:',
      'room_disconnected',
      'room_token',
      "'thirdparty'",
    ]) {
      expect({ neutral, found: guide.includes(neutral) }).toEqual({ neutral, found: false });
    }
    expect(guide).not.toMatch(/svc/i);
    expect(guide).not.toContain('neutral-only');
  });

  test('the provider’s names, dates and base URL are in', () => {
    for (const name of [
      'ovs://streams/',
      'ovs-…',
      'OVS_API_KEY',
      'X-Overshoot-Region: us-west1',
      '`overshoot.cache`',
      "publish: {type: 'livekit', url, token}",
      "source: {type: 'livekit', url, token}",
      '{livekit: {url, token}}',
      '`livekit_token`',
      "inference.backend: 'overshoot'` or `'gemini'`",
      "const BASE = 'https://gateway.customer.example';",
      'BASE=https://gateway.customer.example;',
    ]) {
      expect({ name, found: guide.includes(name) }).toEqual({ name, found: true });
    }
    const h = deprecationHeaders({ ...DATES, link: '' });
    expect(h).toEqual({ deprecation: '@1772323200', sunset: 'Sun, 31 Jan 2027 00:00:00 GMT', link: '<>; rel="deprecation"' });
    expect(guide).toContain(`Deprecation: ${h.deprecation} `);
    expect(guide).toContain(`Sunset: ${h.sunset} `);
    expect(guide).not.toContain(PLACEHOLDER_BASE_URL);
  });

  test('the English word "room" stays where it is not the vendor', () => {
    expect(guide).toContain('the same room protocol');
    expect(guide).toContain('(the service joins your room)');
    expect(guide).toContain('connect your room client');
  });

  test('the neutral-names sentence is dropped whole, the paragraph around it kept', () => {
    expect(guide).not.toContain('Examples use the neutral names');
    expect(guide).toContain('both interfaces run side by\nside.\n\n## What changes');
  });
});

test('under the default profile the guide is the repository’s, minus the markers', () => {
  const cfg = loadConfig({ env: {} });
  expect(usesNeutralNames(brandOf(cfg))).toBe(true);
  const guide = deployedGuide(NEUTRAL_GUIDE, deploymentOf(cfg));
  expect(guide).toBe(withoutMarkers(NEUTRAL_GUIDE));
  expect(guide).toContain('(Examples use the neutral names `svc` for the brand');
});

test('every token of the table occurs in the guide, so the table and the guide stay in step', () => {
  const cfg = loadConfig({ env: {}, file: PROVIDER_PROFILE });
  for (const { neutral } of guideSubstitutions(deploymentOf(cfg))) {
    expect({ neutral, found: NEUTRAL_GUIDE.includes(neutral) }).toEqual({ neutral, found: true });
  }
});

test('one pass: a deployed name that is another neutral token is not rewritten again', () => {
  // A brand called "room" with a vendor called "svc": swapped names must not swap back.
  const brand = brandOf({ brand: 'room', roomVendor: 'svc' });
  const out = deployedGuide("a `svc://x` ref, `type: 'room'`, `svc.cache`", { brand, deprecation: DATES });
  expect(out).toBe("a `room://x` ref, `type: 'svc'`, `room.cache`");
});

test('a token inside a longer word is left alone', () => {
  const brand = brandOf({ brand: 'overshoot', brandAbbreviation: 'ovs', roomVendor: 'livekit' });
  expect(deployedGuide('xsvc- svc- MY_SVC_API_KEY SVC_API_KEY', { brand, deprecation: DATES })).toBe(
    'xsvc- ovs- MY_SVC_API_KEY OVS_API_KEY',
  );
});

test('an unpaired neutral-only marker is a clear error', () => {
  const d = { brand: NEUTRAL_BRAND, deprecation: DATES };
  expect(() => deployedGuide('a <!-- neutral-only --> b', d)).toThrow(GuideMarkupError);
  expect(() => deployedGuide('a <!-- /neutral-only --> b', d)).toThrow(/unpaired/);
});

describe('publicUrl', () => {
  test('PUBLIC_URL sets it; unset it stays undefined', () => {
    expect(loadConfig({ env: { PUBLIC_URL: 'https://gw.example.com' } }).publicUrl).toBe('https://gw.example.com');
    expect(loadConfig({ env: {} }).publicUrl).toBeUndefined();
  });

  test.each([
    ['ftp://gw.example.com', /publicUrl: must be an http/],
    ['not a url', /publicUrl/],
    ['https://user:pw@gw.example.com', /publicUrl: must carry no credentials, query or fragment/],
    ['https://gw.example.com/?token=x', /publicUrl: must carry no credentials/],
  ])('%s is refused at boot, naming the key', (url, message) => {
    expect(() => loadConfig({ env: { PUBLIC_URL: url } })).toThrow(message);
  });
});

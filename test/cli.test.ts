/**
 * The command line (strict per-command flags, per-command help, exit 2 on a bad command line) and
 * the production boot checks, on the parser and on the real process.
 */
import { bootChecks } from '../src/boot-checks';
import { COMMANDS, parseCommandLine, UsageError, USAGE } from '../src/cli';
import { configEnvVars, loadConfig, mergeDeep } from '../src/config';
import { deadline, until } from './helpers/time';
import { runMain, useMainBundle } from './helpers/main-bundle';

describe('parseCommandLine', () => {
  test('each command takes its own flags; no command means serve', () => {
    expect(parseCommandLine([])).toMatchObject({ kind: 'run', command: 'serve' });
    expect(parseCommandLine(['-c', 'x.json'])).toMatchObject({ kind: 'run', command: 'serve', config: 'x.json' });
    expect(parseCommandLine(['emulator', '--config=y.json'])).toMatchObject({ command: 'emulator', config: 'y.json' });
    expect(parseCommandLine(['demo', '--mode', 'frame', '--seconds', '3'])).toMatchObject({
      command: 'demo',
      values: { mode: 'frame', seconds: '3', model: 'local/analyzer' },
    });
  });

  test('help: general and per command', () => {
    expect(parseCommandLine(['--help'])).toEqual({ kind: 'help', text: USAGE });
    const demo = parseCommandLine(['demo', '-h']);
    expect(demo.kind).toBe('help');
    expect(demo.kind === 'help' && demo.text).toMatch(/^usage: legacy-gateway demo .*\n[\s\S]*--seconds N/);
  });

  test('--version and -v, alone or after a command', () => {
    for (const argv of [['--version'], ['-v'], ['emulator', '--version'], ['demo', '-v']])
      expect(parseCommandLine(argv)).toEqual({ kind: 'version' });
  });

  const helpOf = (command: string) => {
    const parsed = parseCommandLine([command, '--help']);
    return parsed.kind === 'help' ? parsed.text : '';
  };
  /** The help's environment sections (from the first one to the end). */
  const envSections = (help: string) => help.slice(help.search(/\n(Environment|Config variables)/));
  /** The environment sections of a command's help, each variable name a space-delimited word. */
  const envOf = (command: string) => ` ${envSections(helpOf(command)).replace(/[,\n]/g, ' ')} `;

  test('each command lists the environment variables it reads; serve every configuration variable', () => {
    for (const { name } of configEnvVars()) expect(envOf('serve')).toContain(` ${name} `);
    for (const name of ['EMULATOR_PORT', 'EMULATOR_HOST', 'LOG_LEVEL', 'SHUTDOWN_GRACE_MS'])
      expect(envOf('emulator')).toContain(` ${name} `);
    for (const name of ['UPSTREAM_URL', 'PORT', 'REDIS_URL', 'EMULATOR_EMBEDDED']) expect(envOf('emulator')).not.toContain(` ${name} `);
    for (const name of ['GATEWAY_URL', 'API_KEY', 'PORT', 'HOST']) expect(envOf('demo')).toContain(` ${name} `);
    for (const name of ['API_KEY', 'UPSTREAM_URL', 'OTEL_*']) expect(envOf('conformance')).toContain(` ${name} `);
  });

  test('help lines fit 120 columns (the environment sections 100)', () => {
    expect(USAGE.split('\n').filter((l) => l.length > 100)).toEqual([]);
    for (const command of Object.keys(COMMANDS)) {
      const help = helpOf(command);
      expect(help.split('\n').filter((l) => l.length > 120)).toEqual([]);
      expect(
        envSections(help)
          .split('\n')
          .filter((l) => l.length > 100),
      ).toEqual([]);
    }
  });

  test.each([
    [['serve', '--prot', '8080'], /legacy-gateway serve: Unknown option '--prot'/],
    [['serve', 'extra'], /legacy-gateway serve: Unexpected argument 'extra'/],
    [['emulator', '--mode', 'frame'], /legacy-gateway emulator: Unknown option '--mode'/],
    [['demo', '--mode', 'video'], /--mode must be clip or frame/],
    [['demo', '--seconds', 'soon'], /--seconds must be a number >= 0/],
    [['demo', '--url'], /legacy-gateway demo: Option '--url <value>' argument missing/],
    [['deploy'], /unknown command 'deploy'/],
    [['bench'], /unknown command 'bench'/],
  ])('%j is refused', (argv, message) => {
    expect(() => parseCommandLine(argv)).toThrow(UsageError);
    expect(() => parseCommandLine(argv)).toThrow(message);
  });
});

describe('bootChecks', () => {
  const cfg = (overrides: Record<string, unknown> = {}) => loadConfig({ env: {}, overrides });
  test('production without an upstream is refused unless the embedded emulator is asked for', () => {
    expect(bootChecks(cfg(), { NODE_ENV: 'production' }).refuse).toMatch(/NODE_ENV=production and no UPSTREAM_URL/);
    expect(bootChecks(cfg({ embeddedEmulator: true }), { NODE_ENV: 'production' }).refuse).toBeUndefined();
    expect(bootChecks(cfg({ upstreamUrl: 'http://upstream.internal' }), { NODE_ENV: 'production' }).refuse).toBeUndefined();
    expect(bootChecks(cfg(), {}).refuse).toBeUndefined();
  });

  test('the shipped deprecation dates draw a warning; announced ones do not', () => {
    expect(bootChecks(cfg(), {}).warnings).toEqual([expect.stringMatching(/deprecation dates are the shipped defaults/)]);
    expect(bootChecks(cfg({ deprecation: { date: '2026-03-01', sunset: '2027-03-01' } }), {}).warnings).toEqual([]);
  });

  test('a fleet (Redis store) with server.trustProxy unset draws a warning naming it; set (even to false) or no fleet, none', () => {
    const fleet = {
      store: { redisUrl: 'redis://r:6379', secret: 'a-fleet-secret-of-at-least-32-characters' },
      deprecation: { date: '2026-03-01', sunset: '2027-03-01' },
    };
    expect(bootChecks(cfg(fleet), {}).warnings).toEqual([expect.stringMatching(/^server\.trustProxy \(TRUST_PROXY\) is unset in a fleet/)]);
    expect(bootChecks(cfg(mergeDeep(fleet, { server: { trustProxy: 1 } })), {}).warnings).toEqual([]);
    expect(bootChecks(cfg(mergeDeep(fleet, { server: { trustProxy: false } })), {}).warnings).toEqual([]);
    expect(bootChecks(cfg({ deprecation: fleet.deprecation }), {}).warnings).toEqual([]);
  });

  test('production defaults: a SIGTERM readiness delay; tests and dev: none', () => {
    expect(loadConfig({ env: { NODE_ENV: 'production' } }).shutdownDelayMs).toBe(5000);
    expect(loadConfig({ env: { NODE_ENV: 'production', SHUTDOWN_DELAY_MS: '0' } }).shutdownDelayMs).toBe(0);
    expect(loadConfig({ env: {} }).shutdownDelayMs).toBe(0);
  });
});

describe('the real process', () => {
  const bundle = useMainBundle();

  test('an unknown flag exits 2 with a message naming it', async () => {
    const p = runMain(bundle(), ['serve', '--upstream', 'http://x'], {});
    expect(await deadline(p.exited, 15_000, 'exit')).toEqual({ code: 2, signal: null });
    expect(p.stderr()).toMatch(/^legacy-gateway serve: Unknown option '--upstream'.*\nRun 'legacy-gateway serve --help'/);
  });

  test('serve --help prints its usage and exits 0', async () => {
    const p = runMain(bundle(), ['serve', '--help'], {});
    expect(await deadline(p.exited, 15_000, 'exit')).toEqual({ code: 0, signal: null });
    expect(p.stdout()).toMatch(/^usage: legacy-gateway serve/);
  });

  test('NODE_ENV=production without UPSTREAM_URL refuses to boot (exit 2, clear message)', async () => {
    const p = runMain(bundle(), ['serve'], { NODE_ENV: 'production', PORT: '0', HOST: '127.0.0.1' });
    expect(await deadline(p.exited, 15_000, 'exit')).toEqual({ code: 2, signal: null });
    expect(p.stderr()).toMatch(/refusing to start: NODE_ENV=production and no UPSTREAM_URL.*EMULATOR_EMBEDDED=true/);
    expect(p.lines.some((l) => String(l.msg).startsWith('gateway listening'))).toBe(false);
  });

  test('NODE_ENV=production with EMULATOR_EMBEDDED=true boots, warning about the default deprecation dates', async () => {
    const p = runMain(bundle(), ['serve'], {
      NODE_ENV: 'production',
      EMULATOR_EMBEDDED: 'true',
      PORT: '0',
      HOST: '127.0.0.1',
      EMULATOR_PORT: '0',
    });
    try {
      const boot = await deadline(p.line('gateway listening'), 20_000, `boot (stderr: ${p.stderr()})`);
      expect(boot.embeddedEmulator).toMatchObject({ controlApi: true });
      // The effective brand tokens of the seed profile.
      expect(boot.brand).toEqual({
        keyPrefix: 'svc-',
        scheme: 'svc://',
        backends: ['svc', 'thirdparty'],
        responseField: 'svc',
        regionHeader: 'X-Svc-Region',
        roomVendor: 'room',
      });
      const warning = p.lines.find((l) => String(l.msg).startsWith('deprecation dates are the shipped defaults'));
      expect(warning).toMatchObject({ level: 40 });
      expect((await fetch(`${String(boot.url)}/healthz`)).status).toBe(200);
    } finally {
      p.child.kill('SIGKILL');
      await p.exited;
    }
  });

  test('the provider profile from the environment: the boot line logs its tokens, and its dev key works', async () => {
    const profile = { BRAND: 'overshoot', BRAND_ABBREVIATION: 'ovs', THIRDPARTY_BACKEND: 'gemini', ROOM_VENDOR: 'livekit' };
    const p = runMain(bundle(), ['serve'], { ...profile, PORT: '0', HOST: '127.0.0.1', EMULATOR_PORT: '0' });
    try {
      const boot = await deadline(p.line('gateway listening'), 20_000, `boot (stderr: ${p.stderr()})`);
      expect(boot.brand).toEqual({
        keyPrefix: 'ovs-',
        scheme: 'ovs://',
        backends: ['overshoot', 'gemini'],
        responseField: 'overshoot',
        regionHeader: 'X-Overshoot-Region',
        roomVendor: 'livekit',
      });
      const models = await fetch(`${String(boot.url)}/v1beta/models`, { headers: { authorization: 'Bearer ovs-local-dev' } });
      expect(models.status).toBe(200);
    } finally {
      p.child.kill('SIGKILL');
      await p.exited;
    }
  });

  test('LOG_PRETTY=true prints lines for a person even on a pipe; unset, a pipe gets JSON', async () => {
    const pretty = runMain(bundle(), ['serve'], { PORT: '0', HOST: '127.0.0.1', EMULATOR_PORT: '0', LOG_PRETTY: 'true' });
    try {
      await deadline(
        until(() => /\] INFO \(gateway\): gateway listening on http:\/\/127\.0\.0\.1:\d+/.test(pretty.stdout())),
        20_000,
        `a pretty boot line (stderr: ${pretty.stderr()})`,
      );
      // Not one JSON log object (a pretty field's own lines may parse as JSON values).
      expect(pretty.lines.filter((l) => typeof l === 'object' && l !== null && 'msg' in l)).toEqual([]);
    } finally {
      pretty.child.kill('SIGKILL');
      await pretty.exited;
    }
    const json = runMain(bundle(), ['serve'], { PORT: '0', HOST: '127.0.0.1', EMULATOR_PORT: '0' });
    try {
      expect(await deadline(json.line('gateway listening'), 20_000, 'a JSON boot line')).toMatchObject({ level: 30, service: 'gateway' });
    } finally {
      json.child.kill('SIGKILL');
      await json.exited;
    }
  });
});

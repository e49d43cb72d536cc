/**
 * `conformance` as the real process (the CLI bundle) against an emulator process with no publisher
 * of its own: exit 0 when every check that ran passed (the kit publishes the frames itself, through
 * rtc-node), 1 naming the failed check, 130 on Ctrl-C with the stream deleted, 2 on a bad command
 * line.
 */
import path from 'node:path';
import { parseCommandLine, UsageError } from '../../src/cli';
import { runMain, useMainBundle } from '../helpers/main-bundle';
import type { MainProcess } from '../helpers/main-bundle';
import { deadline, until } from '../helpers/time';
import { ROOT } from '../helpers/util';
import { editJson, startDouble } from './double';
import type { Double } from './double';

const KEY = 'svc-local-dev';
const bundle = useMainBundle();
let emulator: MainProcess;
let emulatorUrl: string;
let double: Double | undefined;

beforeAll(async () => {
  // The emulator alone: no synthetic publisher (its default), the shipped accounts and models.
  emulator = runMain(bundle(), ['emulator', '--config', path.join(ROOT, 'config', 'default.json')], {
    EMULATOR_PORT: '0',
    LOG_LEVEL: 'info',
  });
  const boot = await deadline(emulator.line('emulator listening'), 30_000, `emulator boot (stderr: ${emulator.stderr()})`);
  emulatorUrl = String(boot.url);
}, 60_000);

afterAll(async () => {
  await double?.close();
  emulator?.child.kill('SIGKILL');
  await emulator?.exited;
});

/** The stream as the emulator reports it now. */
async function readStream(id: string): Promise<Record<string, unknown>> {
  const res = await fetch(`${emulatorUrl}/v1beta/streams/${id}`, { headers: { authorization: `Bearer ${KEY}` } });
  expect(res.status).toBe(200);
  return (await res.json()) as Record<string, unknown>;
}

function streamIdOf(stdout: string): string {
  const m = /^· stream (\S+) created$/m.exec(stdout);
  if (!m) throw new Error(`no stream in ${stdout}`);
  return m[1]!;
}

test('every check passes: exit 0; the kit publishes the frames itself; the stream is deleted', async () => {
  const p = runMain(
    bundle(),
    ['conformance', '--upstream', emulatorUrl, '--key', KEY, '--publish', 'always', '--frame-timeout', '120'],
    {},
  );
  expect(await deadline(p.exited, 120_000, `conformance (stdout: ${p.stdout()})`)).toEqual({ code: 0, signal: null });
  const out = p.stdout();
  expect(out).toMatch(/^· cost: at most about .* on local\/analyzer/m);
  expect(out).toMatch(/^pass +frames\.first +api-reference\/stream-lifecycle\.mdx +after \d+ ms, published by the kit/m);
  expect(out).toMatch(/^pass +viewer-token +api-reference\/viewer-token\.mdx/m);
  expect(out).toMatch(/^CONFORMANT/m);
  expect(await readStream(streamIdOf(out))).toMatchObject({ state: 'ended', end_reason: 'deleted' });
}, 150_000);

test('an upstream that breaks one assumption: exit 1 naming the check; the stream is deleted', async () => {
  double = await startDouble(
    emulatorUrl,
    editJson(
      (ex) => ex.method === 'POST' && ex.path === '/v1beta/streams' && ex.status === 201,
      (b) => delete (b.publish as Record<string, unknown>).token,
    ),
  );
  // No publisher and no frames: the frame checks are skipped, which fails nothing.
  const p = runMain(bundle(), ['conformance', '--upstream', double.url, '--key', KEY, '--publish', 'never', '--frame-timeout', '0.5'], {});
  expect(await deadline(p.exited, 120_000, `conformance (stdout: ${p.stdout()})`)).toEqual({ code: 1, signal: null });
  const out = p.stdout();
  expect(out).toMatch(/^FAIL +stream\.create +api-reference\/create-stream\.mdx +publish\.token should be string, got nothing$/m);
  expect(out).toMatch(
    /^skip +frames\.first +api-reference\/stream-lifecycle\.mdx +no frame within \d+ s and no publisher: publishing is off \(--publish never\)$/m,
  );
  expect(out).toMatch(/^NOT CONFORMANT: stream\.create$/m);
  expect(await readStream(streamIdOf(out))).toMatchObject({ state: 'ended', end_reason: 'deleted' });
}, 150_000);

test('Ctrl-C while it waits for frames: the stream is deleted, exit 130', async () => {
  const p = runMain(bundle(), ['conformance', '--upstream', emulatorUrl, '--key', KEY, '--publish', 'never', '--frame-timeout', '600'], {});
  await deadline(
    until(() => /^· waiting for the first frame$/m.test(p.stdout())),
    60_000,
    `waiting (stdout: ${p.stdout()})`,
  );
  const id = streamIdOf(p.stdout());
  expect(await readStream(id)).toMatchObject({ state: 'active' });
  p.child.kill('SIGINT');
  expect(await deadline(p.exited, 60_000, `exit after SIGINT (stdout: ${p.stdout()})`)).toEqual({ code: 130, signal: null });
  expect(p.stdout()).toMatch(/^INTERRUPTED/m);
  expect(p.stdout()).toMatch(new RegExp(`^stream ${id}: deleted$`, 'm'));
  expect(await readStream(id)).toMatchObject({ state: 'ended', end_reason: 'deleted' });
}, 120_000);

test('a missing key exits 2 naming it', async () => {
  const p = runMain(bundle(), ['conformance', '--upstream', emulatorUrl], {});
  expect(await deadline(p.exited, 30_000, 'exit')).toEqual({ code: 2, signal: null });
  expect(p.stderr()).toMatch(/give --key KEY \(or API_KEY\)/);
}, 60_000);

describe('the command line', () => {
  test('flags and their defaults', () => {
    expect(parseCommandLine(['conformance', '--upstream', 'http://u', '--key', 'k'])).toMatchObject({
      command: 'conformance',
      values: { upstream: 'http://u', key: 'k', publish: 'auto', 'frame-timeout': '30', skip: '' },
    });
    const help = parseCommandLine(['conformance', '--help']);
    expect(help.kind === 'help' && help.text).toMatch(/^usage: legacy-gateway conformance --upstream URL --key KEY[\s\S]*Exit status: 0/);
  });

  test.each([
    [['conformance', '--publish', 'sometimes'], /--publish must be auto, always or never/],
    [['conformance', '--frame-timeout', '0'], /--frame-timeout must be a number of seconds > 0/],
    [['conformance', '--skip', 'viewer-token,nope'], /--skip names no check: nope/],
  ])('%j is refused', (argv, message) => {
    expect(() => parseCommandLine(argv)).toThrow(UsageError);
    expect(() => parseCommandLine(argv)).toThrow(message);
  });
});

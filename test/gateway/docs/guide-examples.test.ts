/**
 * The guide's clip program, as the gateway serves it, run as a customer runs it against a real
 * gateway and emulator under both profiles (the provider's with the emulator in the provider's
 * dialect): it waits for the first frame (a completion before it fails as the guide says), answers
 * once video arrives, and deletes its stream on Ctrl-C.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import ts from 'typescript';
import { brandOf } from '../../../src/brand';
import { runNode } from '../../helpers/node-process';
import { http, startStack } from '../../helpers/stack';
import type { Stack } from '../../helpers/stack';
import { deadline, until } from '../../helpers/time';
import { ROOT } from '../../helpers/util';
import { PROVIDER_PROFILE, servedGuide, typescriptExamples } from './guide-examples';

const PROFILES = [
  { profile: 'default', overrides: {}, keyVariable: 'SVC_API_KEY', key: 'svc-local-dev', notYetStatus: 422 },
  {
    profile: 'provider',
    overrides: { ...(JSON.parse(fs.readFileSync(PROVIDER_PROFILE, 'utf8')) as object), emulator: { dialect: 'provider' } },
    keyVariable: 'OVS_API_KEY',
    key: 'ovs-local-dev',
    notYetStatus: 409,
  },
];

// The program imports `openai`: it runs from a folder whose node_modules is the repository's.
let dir: string;
beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'guide-example-'));
  fs.symlinkSync(path.join(ROOT, 'node_modules'), path.join(dir, 'node_modules'));
});
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

describe.each(PROFILES)('the $profile profile', ({ profile, overrides, keyVariable, key, notYetStatus }) => {
  let stack: Stack;
  // No synthetic publisher: the test publishes once the program says where, as a customer's publisher would.
  beforeAll(async () => {
    stack = await startStack({
      ...overrides,
      emulator: { ...(overrides as { emulator?: object }).emulator, autoPublish: { enabled: false } },
    });
  });
  afterAll(() => stack.close());

  test('the clip program waits for the first frame, answers, and deletes its stream on SIGINT', async () => {
    const [program] = typescriptExamples(servedGuide(stack.cfg, stack.url), profile);
    expect(program!.code).toContain(`const BASE = '${stack.url}';`);
    const file = path.join(dir, `clip-${profile}.mjs`);
    const js = ts.transpileModule(program!.code, { compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 } });
    fs.writeFileSync(file, js.outputText);
    const run = runNode(file, [], { PATH: process.env.PATH, [keyVariable]: key });

    await deadline(
      until(() => /stream [0-9a-f-]{36}: publish a camera track to /.test(run.stdout())),
      20_000,
      `the program names its stream (stderr: ${run.stderr()})`,
    );
    const id = /stream ([0-9a-f-]{36}):/.exec(run.stdout())![1]!;

    // Before the first frame, the program's own completion would fail as the guide says.
    const early = await http(stack.url, 'POST', '/v1beta/chat/completions', {
      key,
      body: {
        model: 'local/analyzer',
        messages: [
          {
            role: 'user',
            content: [{ type: 'video_url', video_url: { url: `${brandOf(stack.cfg).scheme}://streams/${id}?start_offset_ms=-1000` } }],
          },
        ],
      },
    });
    expect({ status: early.status, body: early.body }).toMatchObject({
      status: notYetStatus,
      body: { detail: { error: { code: 'frame_not_yet_produced' } } },
    });

    const published = await http(stack.emulator.url, 'POST', `/_emulator/streams/${id}/publisher`, {
      key: null,
      body: { fps: 10, width: 160, height: 120 },
    });
    expect(published.status).toBe(201);
    await deadline(
      until(() => (run.stdout().match(/^You asked: "What is happening\?"/gm) ?? []).length >= 2),
      30_000,
      'two answers',
    );

    run.child.kill('SIGINT');
    expect(await deadline(run.exited, 15_000, 'the program exits on SIGINT')).toEqual({ code: 0, signal: null });
    expect(run.stdout()).toContain(`stream ${id} deleted`);
    // It never asked before the first frame, and nothing failed.
    expect(run.stderr()).toBe('');
    const after = await http(stack.url, 'GET', `/v1beta/streams/${id}`, { key });
    expect(after.body).toMatchObject({ state: 'ended', end_reason: 'deleted' });
  }, 90_000);
});

/**
 * What the real CLI's log says, read by a person and by a machine. On a terminal (a pseudo-terminal
 * from util-linux `script`): a short boot summary, one line per request naming the full path (the
 * mount included), its status and time. On a pipe: one JSON object a line, the boot line's fields
 * unchanged, the access line's message naming the full path too.
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { stripVTControlCharacters } from 'node:util';
import { KEY, clipBody } from './helpers/stack';
import { deadline, until } from './helpers/time';
import { ROOT, runMain, useMainBundle } from './helpers/main-bundle';

const CONFIG = path.join(ROOT, 'config', 'default.json');
const ADMIN_TOKEN = 'an-admin-token-for-the-log-test';
const ENV = { PORT: '0', HOST: '127.0.0.1', EMULATOR_PORT: '0', ADMIN_TOKEN };

/** The same few requests on both runs: the stream's id comes back. */
async function requests(url: string): Promise<string> {
  expect((await fetch(`${url}/healthz`)).status).toBe(200);
  const created = await fetch(`${url}/v0.2/streams`, {
    method: 'POST',
    headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify(clipBody()),
  });
  expect(created.status).toBe(201);
  const { stream_id: id } = (await created.json()) as { stream_id: string };
  expect((await fetch(`${url}/v0.2/streams/${id}`, { method: 'DELETE', headers: { authorization: `Bearer ${KEY}` } })).status).toBe(200);
  expect((await fetch(`${url}/no-such-route`)).status).toBe(404);
  // Another mounted router: /admin, without its token.
  expect((await fetch(`${url}/admin/deprecation`)).status).toBe(401);
  expect((await fetch(`${url}/v1beta/models`, { headers: { authorization: `Bearer ${KEY}` } })).status).toBe(200);
  return id;
}

/** The access lines each run must show: method, full path, status (and the error code it answered with). */
const expectedAccess = (id: string) => [
  ['POST', '/v0.2/streams', '201'],
  ['DELETE', `/v0.2/streams/${id}`, '200'],
  ['GET', '/no-such-route', '404'],
  ['GET', '/admin/deprecation', '401', 'unauthorized'],
  ['GET', '/v1beta/models', '200'],
];

describe('the CLI’s logs', () => {
  const bundle = useMainBundle();

  test('on a terminal: a boot summary of at most 10 lines, then one line per request with its full path, status and time', async () => {
    const quote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
    const command = ['exec', process.execPath, bundle().file, 'serve', '--config', CONFIG].map(quote).join(' ');
    const child = spawn('script', ['-qfec', command, '/dev/null'], {
      env: { PATH: process.env.PATH, NODE_PATH: path.join(ROOT, 'node_modules'), SHELL: '/bin/sh', ...ENV },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const exited = new Promise((resolve) => child.once('exit', resolve));
    let raw = '';
    child.stdout.on('data', (d: Buffer) => (raw += d.toString()));
    child.stderr.on('data', (d: Buffer) => (raw += d.toString()));
    // What a person sees: colours (on a terminal) and the terminal's carriage returns left out.
    const lines = () =>
      stripVTControlCharacters(raw)
        .replace(/\r/g, '')
        .split('\n')
        .filter((l) => l.length > 0);
    const access = /^\[\d\d:\d\d:\d\d\.\d{3}\] (?:INFO|WARN) \(gateway\): ([A-Z]+) (\/\S*) (\d{3}) (\d+)ms(?: · .*)?$/;
    try {
      let url = '';
      await deadline(
        until(() => {
          url = /gateway listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(lines().join('\n'))?.[1] ?? '';
          return url !== '';
        }),
        30_000,
        `a boot line on the terminal (output: ${raw})`,
      );
      expect(raw).toContain('\u001b['); // a terminal: coloured
      const id = await requests(url);
      const wanted = expectedAccess(id);
      const seen = () => lines().filter((l) => access.test(l));
      await deadline(
        until(() => wanted.every(([m, p, s]) => seen().some((l) => l.includes(`: ${m} ${p} ${s} `)))),
        20_000,
        `the access lines (output: ${lines().join('\n')})`,
      );

      const all = lines();
      const firstAccess = all.findIndex((l) => access.test(l));
      const boot = all.slice(0, firstAccess);
      expect(boot.length).toBeLessThanOrEqual(10);
      expect(boot.join('\n')).toMatch(/\] INFO \(gateway\): gateway listening on http:\/\/127\.0\.0\.1:\d+\n/);
      expect(boot.join('\n')).toMatch(/upstream +http:\/\/127\.0\.0\.1:\d+ = embedded emulator/);
      expect(boot.join('\n')).toMatch(/store +memory/);
      expect(boot.join('\n')).toContain(CONFIG);
      // Every access line is one line: the next one is a line of its own, never an indented field.
      for (const [i, l] of all.entries()) {
        if (access.test(l) && i + 1 < all.length) expect(all[i + 1]).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] /);
      }
      for (const [m, p, s, code] of wanted) {
        const line = seen().find((l) => l.includes(`: ${m} ${p} ${s} `));
        const error = code ? ` · ${code}` : '';
        expect(line).toMatch(new RegExp(`: ${m} ${p.replace(/[.?]/g, '\\$&')} ${s} \\d+ms${error} · 127\\.0\\.0\\.1 · [0-9a-f-]{8}$`));
      }
      // The quiet probe is not logged; nothing names the key.
      expect(all.join('\n')).not.toContain('/healthz');
      expect(all.join('\n')).not.toContain(KEY);
    } finally {
      child.kill('SIGTERM');
      await exited;
    }
  }, 60_000);

  test('on a pipe: one JSON object a line; the boot line’s fields; access messages with the full path', async () => {
    const p = runMain(bundle(), ['serve', '--config', CONFIG], ENV);
    try {
      const boot = await deadline(p.line('gateway listening'), 30_000, `boot (stderr: ${p.stderr()})`);
      expect(boot).toMatchObject({
        level: 30,
        url: expect.stringMatching(/^http:\/\/127\.0\.0\.1:\d+$/),
        port: expect.any(Number),
        upstream: expect.stringMatching(/^http:\/\/127\.0\.0\.1:\d+$/),
        embeddedEmulator: { controlApi: true, autoPublish: true },
        legacyLeaseSeconds: 45,
        config: { files: [CONFIG] },
        store: 'memory',
        storeUrl: null,
        metrics: '/metrics',
        metricsUrl: null,
        adminReport: '/admin/deprecation',
      });
      const id = await requests(String(boot.url));
      for (const [m, path, s] of expectedAccess(id)) {
        const line = await deadline(p.line(`${m} ${path} ${s} `), 20_000, `the access line of ${m} ${path}`);
        expect(line).toMatchObject({ req: { method: m, url: path, remoteAddress: '127.0.0.1' }, res: { statusCode: Number(s) } });
        expect(line.msg).toBe(`${m} ${path} ${s} ${String(line.responseTime)}ms`);
      }
      const text = p.stdout().trim().split('\n');
      for (const l of text) expect(() => JSON.parse(l) as unknown).not.toThrow();
      expect(p.lines.length).toBe(text.length);
    } finally {
      p.child.kill('SIGKILL');
      await p.exited;
    }
  }, 60_000);
});

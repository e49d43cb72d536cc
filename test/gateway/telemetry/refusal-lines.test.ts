/**
 * Expected refusals are log lines without a stack that name what was refused: a create for a model
 * that is not ready (the model, on the access line), a tick the upstream answers 503
 * `model_unavailable` (the stream and the model). The upstream probe's failure names the URL it
 * probed and why it failed.
 */
import { logLines } from '../../helpers/log-lines';
import { clipBody, frameBody, http, startStack } from '../../helpers/stack';
import type { Stack } from '../../helpers/stack';
import { deadline, until } from '../../helpers/time';
import { freePort } from '../../helpers/util';
import { createLogger } from '../../../src/lib/logger';
import { gatewayOn, startRawUpstream } from '../doubles';

type Line = Record<string, unknown>;

const parsed = (lines: string[]) => lines.map((l) => JSON.parse(l) as Line);

async function lineWhere(lines: string[], what: string, match: (l: Line) => boolean): Promise<Line> {
  let found: Line | undefined;
  await deadline(
    until(() => (found = parsed(lines).find(match)) !== undefined, 20),
    20_000,
    what,
  );
  return found!;
}

describe('refusals from a not-ready model', () => {
  const log = logLines();
  let s: Stack;
  beforeAll(async () => {
    s = await startStack({}, {}, { log: log.sink });
  });
  afterAll(() => s.close());

  test('a create for a model that is not ready: a warn access line naming the model, no stack', async () => {
    const r = await http(s.url, 'POST', '/v0.2/streams', { body: clipBody({}, { model: 'local/offline' }) });
    expect(r.status).toBe(503);
    expect(r.body).toMatchObject({ error: 'model_unavailable' });
    const line = await lineWhere(log.lines, 'the access line of the refused create', (l) =>
      String(l.msg).startsWith('POST /v0.2/streams 503'),
    );
    expect(line).toMatchObject({
      level: 40,
      req: { method: 'POST', url: '/v0.2/streams' },
      res: { statusCode: 503 },
      error: { code: 'model_unavailable', model: 'local/offline', modelStatus: 'unavailable' },
    });
    expect(line.msg).toMatch(/^POST \/v0\.2\/streams 503 \d+ms$/);
    expect(line).not.toHaveProperty('err');
    expect(JSON.stringify(line)).not.toContain('stack');
  });

  test('a tick the upstream answers 503 model_unavailable: one warn line naming the stream and the model, no stack', async () => {
    const created = await http(s.url, 'POST', '/v0.2/streams', { body: frameBody() });
    expect(created.status).toBe(201);
    const id = (created.body as { stream_id: string }).stream_id;
    // Every model (the fallbacks too) refuses until the faults are cleared.
    await http(s.emulator.url, 'POST', '/_emulator/faults', {
      body: { model: '*', count: 1000, status: 503, code: 'model_unavailable', message: 'Model is warming up' },
    });
    try {
      const line = await lineWhere(
        log.lines,
        'the tick refusal line',
        (l) => l.streamId === id && String(l.msg).startsWith('inference refused'),
      );
      expect(line).toMatchObject({
        level: 40,
        streamId: id,
        model: 'local/analyzer',
        status: 503,
        code: 'model_unavailable',
        msg: 'inference refused upstream: HTTP 503 model_unavailable',
      });
      expect(line).not.toHaveProperty('err');
      expect(JSON.stringify(line)).not.toContain('stack');
    } finally {
      await http(s.emulator.url, 'DELETE', '/_emulator/faults');
      await http(s.url, 'DELETE', `/v0.2/streams/${id}`);
    }
  });
});

describe('the upstream probe', () => {
  const probeLine = (lines: string[]) =>
    lineWhere(lines, 'the probe line', (l) => String(l.msg).startsWith('upstream probe:') && l.level === 40);

  test('nothing listening: the line names the URL and ECONNREFUSED', async () => {
    const log = logLines();
    const url = `http://127.0.0.1:${await freePort()}`;
    const gw = await gatewayOn(url, {}, createLogger('info', 'gateway', log.sink));
    try {
      const line = await probeLine(log.lines);
      expect(line.msg).toContain(url);
      expect(line.msg).toContain('ECONNREFUSED');
      expect(line).toMatchObject({ upstream: url, cause: expect.stringMatching(/^ECONNREFUSED/) });
    } finally {
      await gw.close();
    }
  });

  test('an upstream that answers 500: the line names the URL and the status', async () => {
    const up = await startRawUpstream((req, res) => {
      req.resume();
      res.writeHead(500, { 'content-type': 'application/json' });
      res.end('{"detail":"boom"}');
    });
    const log = logLines();
    const gw = await gatewayOn(up.url, {}, createLogger('info', 'gateway', log.sink));
    try {
      const line = await probeLine(log.lines);
      expect(line.msg).toBe(`upstream probe: ${up.url} unreachable: HTTP 500 (readiness unaffected)`);
    } finally {
      await gw.close();
      await up.close();
    }
  });
});

/**
 * Log injection end to end: an output schema whose `format` carries a newline and a JSON line
 * reaches the gateway's log only as an escaped field of its own pino line; nothing on the console.
 */
import { logLines } from '../../helpers/log-lines';
import { createLogger } from '../../../src/lib/logger';
import { startEmulator } from '../../../src/emulator/server';
import { startGateway } from '../../../src/gateway/server';
import { clipBody, http } from '../../helpers/stack';
import { FAST_RETRY, testConfig } from '../../helpers/config';

test('a format value with a newline and a JSON line cannot forge a log line', async () => {
  const { sink, lines } = logLines();
  const cfg = testConfig();
  const emulator = await startEmulator(cfg, createLogger('silent'));
  const gateway = await startGateway(cfg, createLogger('warn', 'gateway', sink), emulator.url, { retry: FAST_RETRY });
  const consoleSpies = (['log', 'warn', 'error'] as const).map((m) => jest.spyOn(console, m).mockImplementation(() => undefined));
  try {
    const evil = 'date"}\n{"level":60,"msg":"INJECTED","service":"gateway"}\n';
    const r = await http(gateway.url, 'POST', '/v0.2/streams', {
      body: clipBody({}, { output_schema_json: { type: 'object', properties: { when: { type: 'string', format: evil } } } }),
    });
    expect(r.status).toBe(201);
    await http(gateway.url, 'DELETE', `/v0.2/streams/${(r.body as { stream_id: string }).stream_id}`);
    for (const spy of consoleSpies) expect(spy).not.toHaveBeenCalled();
  } finally {
    consoleSpies.forEach((s) => s.mockRestore());
    await gateway.close();
    await emulator.close();
  }
  const parsed = lines.map((l) => JSON.parse(l) as { msg: string; detail?: string });
  expect(parsed.some((p) => p.msg === 'INJECTED')).toBe(false);
  expect(parsed.find((p) => p.msg === 'json schema compiler warning')?.detail).toContain('\n{"level":60,"msg":"INJECTED"');
});

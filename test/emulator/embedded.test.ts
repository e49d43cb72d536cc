/**
 * The emulator `serve` embeds honours the synthetic-publisher and control-API
 * settings (config file, environment); unset, both default to on there.
 */
import { loadConfig } from '../../src/config';
import { createLogger } from '../../src/lib/logger';
import { embeddedEmulatorConfig, startEmulator } from '../../src/emulator/server';
import { http } from '../helpers/stack';

const base = { emulator: { port: 0, host: '127.0.0.1' } };

async function publishingOnCreate(env: Record<string, string>): Promise<{ publishing: boolean; control: number }> {
  const cfg = embeddedEmulatorConfig(loadConfig({ env, overrides: base }));
  const emu = await startEmulator(cfg, createLogger('silent'));
  try {
    const created = await http(emu.url, 'POST', '/v1beta/streams', { body: {} });
    expect(created.status).toBe(201);
    const id = (created.body as { id: string }).id;
    return { publishing: emu.emulator.publishers.isRunning(id), control: (await http(emu.url, 'GET', '/_emulator/state')).status };
  } finally {
    await emu.close();
  }
}

describe('the embedded emulator', () => {
  test('unset: synthetic publisher and control API on (a fresh clone shows results at once)', async () => {
    expect(await publishingOnCreate({})).toEqual({ publishing: true, control: 200 });
  });

  test('EMULATOR_AUTO_PUBLISH=false and EMULATOR_CONTROL_API=false are honoured', async () => {
    expect(await publishingOnCreate({ EMULATOR_AUTO_PUBLISH: 'false' })).toEqual({ publishing: false, control: 200 });
    expect(await publishingOnCreate({ EMULATOR_AUTO_PUBLISH: 'false', EMULATOR_CONTROL_API: 'false' })).toEqual({
      publishing: false,
      control: 404,
    });
  });

  test('the standalone emulator keeps both off unless set', () => {
    const cfg = loadConfig({ env: {}, overrides: base });
    expect([cfg.emulator.controlApi ?? false, cfg.emulator.autoPublish.enabled ?? false]).toEqual([false, false]);
  });
});

import { settingOf } from '../config';
import type { Config } from '../config';
import { createHttpServer } from '../lib/http-server';
import { closeServer, dialHost, listen } from '../lib/listen';
import type { Logger } from '../lib/logger';
import { createEmulator } from './app';
import type { Emulator, EmulatorOptions } from './app';

export interface RunningEmulator {
  /** Base URL (http://host:port) of the emulator's /v1beta + /billing. */
  url: string;
  port: number;
  emulator: Emulator;
  close(): Promise<void>;
}

/**
 * The config of the emulator `serve` embeds when no upstream is configured: the control API and the
 * synthetic publisher default to on there (a fresh clone shows results at once), but a setting in
 * the config file or the environment (`EMULATOR_AUTO_PUBLISH=false`) is honoured.
 */
export function embeddedEmulatorConfig(cfg: Config): Config {
  return {
    ...cfg,
    emulator: {
      ...cfg.emulator,
      controlApi: cfg.emulator.controlApi ?? true,
      autoPublish: { ...cfg.emulator.autoPublish, enabled: cfg.emulator.autoPublish.enabled ?? true },
    },
  };
}

/** Starts the emulator on its own HTTP server (port 0 picks a free port). */
export async function startEmulator(cfg: Config, logger: Logger, opts: Pick<EmulatorOptions, 'now'> = {}): Promise<RunningEmulator> {
  let base = '';
  const publishUrl = () => (cfg.emulator.publicUrl ?? base).replace(/^http/, 'ws');
  const baseUrl = () => (cfg.emulator.publicUrl ?? base).replace(/\/+$/, '');
  const emulator = createEmulator(cfg, logger, publishUrl, { ...opts, baseUrl });
  const server = createHttpServer(emulator.app, cfg.server);
  server.on('upgrade', (req, socket, head) => {
    socket.on('error', () => socket.destroy());
    if (!emulator.handleUpgrade(req, socket, head)) {
      socket.end('HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n');
    }
  });
  let port: number;
  try {
    port = await listen(server, cfg.emulator.port, cfg.emulator.host, { server: 'emulator', setting: settingOf('emulator.port') });
  } catch (err) {
    await emulator.close();
    throw err;
  }
  base = `http://${dialHost(cfg.emulator.host)}:${port}`;
  return {
    url: base,
    port,
    emulator,
    async close() {
      await emulator.close();
      await closeServer(server);
    },
  };
}

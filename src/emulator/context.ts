import type { Brand } from '../brand';
import type { Config } from '../config';
import type { Logger } from '../lib/logger';
import type { Accounts } from './accounts';
import type { FaultInjector } from './faults';
import type { ModelRegistry } from './models/registry';
import type { StreamRegistry } from './streams';
import type { RoomKeys } from './room/tokens';

/** Everything the emulator's route modules share; built once per emulator instance (no module state). */
export interface EmulatorContext {
  cfg: Config;
  brand: Brand;
  logger: Logger;
  accounts: Accounts;
  streams: StreamRegistry;
  models: ModelRegistry;
  faults: FaultInjector;
  /** Faults armed for the media room's next WHIP publishes (`/_emulator/whip/faults`). */
  whipFaults: FaultInjector;
  roomKeys: RoomKeys;
  /** ws:// URL of the media room handed out as `publish.url` (set once the server listens). */
  publishUrl(): string;
  /** http:// base URL of this emulator as clients reach it (hosted pages such as checkout). */
  baseUrl(): string;
  /** Wall clock (Unix ms) of everything time-dependent the routes decide; injectable in tests. */
  now(): number;
}

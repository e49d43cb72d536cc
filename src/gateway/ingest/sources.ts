/**
 * The gateway's media sources, one per transport (`StreamSources` of the sessions): native
 * (nothing here), webrtc over WHIP (`legacy.webrtc.mode: whip`, the default) or through the relay
 * (`relay`), and the customer's room through the relay. Adding a source is a file and a line here.
 */
import type { LegacyConfig } from '../../config';
import type { Logger } from '../../lib/logger';
import type { Clock } from '../../lib/timers';
import { nativeSource } from '../legacy';
import type { MediaRelay, StreamSource, StreamSources } from '../legacy';
import { RelaySource } from './relay-source';
import { WhipSource } from './whip-source';

export interface GatewaySourcesOptions {
  cfg: Pick<LegacyConfig, 'webrtc'>;
  logger: Logger;
  clock: Clock;
  /** The media relay the relayed sources run on (customer rooms; webrtc in relay mode). */
  relay: MediaRelay;
}

export function gatewaySources(opts: GatewaySourcesOptions): StreamSources & { whip?: WhipSource } {
  const { cfg, relay } = opts;
  const whip = cfg.webrtc.mode === 'whip' ? new WhipSource({ cfg: cfg.webrtc, logger: opts.logger, clock: opts.clock }) : undefined;
  const bySource: Record<'native' | 'webrtc' | 'room', StreamSource> = {
    native: nativeSource,
    webrtc: whip ?? new RelaySource(relay, false),
    room: new RelaySource(relay, true),
  };
  return {
    whip,
    of: (transport) => bySource[transport],
    get held() {
      return relay.activeCount ?? 0;
    },
    async close() {
      whip?.close();
    },
  };
}

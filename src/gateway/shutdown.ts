/**
 * The gateway's side of a shutdown, one step per lifecycle state (./lifecycle.ts): each step moves
 * the lifecycle on and does what the state means. When each runs is server.ts's call.
 */
import { realClock } from '../lib/timers';
import type { Clock } from '../lib/timers';
import type { UpstreamClient } from '../upstream/client';
import type { FleetMember } from './fleet/member';
import type { IngestRelay } from './ingest';
import { LEGACY_CLOSES } from './legacy';
import type { LegacySessions, ResultsSockets, StreamSources } from './legacy';
import type { Lifecycle } from './lifecycle';
import type { Passthrough } from './passthrough';
import type { Store } from './store/store';
import type { GatewayTelemetry } from './telemetry/gateway-telemetry';
import { utcDay } from './telemetry/usage';

export interface GatewayShutdown {
  /** `unready`: /readyz answers 503 while everything else keeps serving (the wait before the drain or the close). */
  markUnready(): void;
  /**
   * The drain (a fleet replica's SIGTERM), `holding`: no new legacy streams here, streams whose
   * media does not live here go to replicas not draining, and this replica stays a fleet member so
   * its results sockets and media relays keep working until they end. False (nothing held) when solo
   * or the last replica alive: nobody could take the streams, so they end as on any shutdown.
   */
  holdConnections(): Promise<boolean>;
  /** What a holding replica still holds: open results sockets and running media relays. */
  held(): { sockets: number; relays: number };
  /**
   * `leaving`: legacy creates and new results sockets are refused; in a fleet with replicas alive that
   * are not draining, live legacy streams are handed over to them (webrtc ones end); otherwise they
   * end (sockets close with 1001 `server_shutdown`, upstream streams deleted).
   */
  handOverOrEnd(why?: string): Promise<void>;
  /** `closed`: ends what is left (sockets close), flushes telemetry, releases everything. */
  close(): Promise<void>;
}

export interface ShutdownParts {
  sessions: Pick<LegacySessions, 'stopCreating' | 'closeAll'>;
  fleet: FleetMember;
  sockets: Pick<ResultsSockets, 'connections' | 'close'>;
  /** The media sources (what they hold here is held; closed here); `ingest`: the gateway's own relay, closed here. */
  sources?: Pick<StreamSources, 'held' | 'close'>;
  ingest?: Pick<IngestRelay, 'close'>;
  telemetry: Pick<GatewayTelemetry, 'upstreamHealth' | 'rollup' | 'sunset' | 'usage'>;
  upstream: Pick<UpstreamClient, 'close'>;
  passthrough: Pick<Passthrough, 'close'>;
  /** The passthrough's batched request telemetry: from the close on, each request's runs at once. */
  passthroughSettled?: { close(): void };
  /** The store when the gateway made it (closed last); an injected one is closed by its owner. */
  ownStore?: Pick<Store, 'close'>;
  clock?: Clock;
}

export function gatewayShutdown(lifecycle: Lifecycle, parts: ShutdownParts): GatewayShutdown {
  const { sessions, fleet, sockets, telemetry } = parts;
  /** The hand-over moved this replica's streams to others: their sockets close so that clients reconnect. */
  let handedOver = false;
  /** Streams this replica ended on its way out (`server_shutdown`): their sockets say so, not 1012. */
  const endedHere = new Set<string>();
  const endAll = async () => {
    for (const id of await sessions.closeAll()) endedHere.add(id);
  };
  let closing: Promise<void> | undefined;

  return {
    markUnready() {
      lifecycle.advance('unready');
    },
    async holdConnections() {
      lifecycle.advance('unready');
      sessions.stopCreating();
      const holding = await fleet.beginDrain();
      if (holding) lifecycle.advance('holding');
      return holding;
    },
    held: () => ({ sockets: sockets.connections, relays: parts.sources?.held ?? 0 }),
    async handOverOrEnd(why?: string) {
      lifecycle.advance('leaving');
      // Handed-over streams leave this replica; what is left (webrtc, or no other replica) ends.
      handedOver = await fleet.handOver(why);
      await endAll();
    },
    close() {
      closing ??= (async () => {
        lifecycle.advance('closed');
        // Requests cut from here on settle with no timer left to write their lines before the exit.
        parts.passthroughSettled?.close();
        telemetry.upstreamHealth.stop();
        await fleet.stop();
        await endAll();
        await parts.sources?.close();
        await parts.ingest?.close();
        await sockets.close(handedOver ? LEGACY_CLOSES.replicaLeaving : undefined, endedHere);
        await telemetry.rollup.stop();
        await telemetry.sunset.close();
        await telemetry.usage.close();
        // The day so far, so a restart never loses the last summary.
        await telemetry.rollup.run(utcDay((parts.clock ?? realClock).now()), { partial: true });
        await parts.upstream.close();
        parts.passthrough.close();
        await parts.ownStore?.close();
      })();
      return closing;
    },
  };
}

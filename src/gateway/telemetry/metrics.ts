import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { StoreCallSink } from '../store/measured';
import { MIGRATION_STATUSES } from './migration';

/** Seconds buckets for request-scale latencies (1 ms … 30 s). */
const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
/** Seconds buckets for the gateway's own small delays (scheduler lateness, fan-out). */
const SMALL_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5];
/** Seconds buckets for store calls: a memory call (µs), a Redis round trip (0.1–1 ms), its 2 s timeout. */
const STORE_BUCKETS = [0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5];

export interface MetricsSources extends ScrapedSources {
  /** Every end reason a legacy stream can have: each series starts at 0, so rates and panels see it before the first end. */
  endReasons?: readonly string[];
  /** The announced sunset of /v0.2 (`deprecation.sunset`), ms since the epoch. */
  sunsetMs?: number;
}

/**
 * What the gauges read at each scrape; each gauge exists once its source is given, to the
 * constructor or later to `observe` (a part built after the metrics it reports to).
 */
export interface ScrapedSources {
  /** Live legacy streams in this process. */
  activeStreams?(): number;
  /** Open results sockets in this process. */
  socketConnections?(): number;
  /** Fleet: 1 while this replica counts itself cut from the upstream (its streams go to others), else 0. */
  upstreamImpaired?(): number;
  /** Distinct API keys (hashes) that ever used /v0.2 (from the store). */
  deprecatedKeys?(): Promise<number>;
  /** Last upstream probe: 1 answered, 0 failed; undefined before the first one. */
  upstreamUp?(): number | undefined;
  /** API keys per migration status, fleet-wide (the report's `totals.by_status`); read at most once per MIGRATION_REFRESH_MS. */
  migrationStatuses?(): Promise<Record<string, number>>;
  /** The media worker's state and figures (src/gateway/ingest/worker-relay.ts). */
  mediaWorker?(): { up: boolean; rssBytes: number; heapUsedBytes: number; cpuSeconds: number; relays: number };
}

/** The migration gauge reads every key's record from the store: at most this often, whatever the scrape rate. */
const MIGRATION_REFRESH_MS = 60_000;
/** What a draining replica still holds (docs/operations.md, Shutdown). */
export interface DrainState {
  draining: boolean;
  sockets: number;
  relays: number;
  secondsLeft: number;
}

/**
 * Every Prometheus metric of one gateway, in its own registry (no global state: several gateways
 * can live in one process). Labels never carry keys; per-key usage lives in the deprecation report.
 */
export class GatewayMetrics {
  readonly registry = new Registry();

  readonly httpRequests: Counter<'method' | 'route' | 'status'>;
  readonly httpDuration: Histogram<'method' | 'route'>;
  readonly passthroughRequests: Counter<'prefix' | 'outcome'>;
  readonly passthroughUpstreamHeaders: Histogram<'prefix'>;
  readonly legacyRequests: Counter<'endpoint'>;
  readonly streamsCreated: Counter<'source' | 'mode'>;
  readonly streamsEnded: Counter<'reason'>;
  readonly deprecatedFields: Counter<'field'>;
  readonly inferences: Counter<'model' | 'outcome'>;
  readonly outputTokens: Counter<'model'>;
  readonly inferenceLatency: Histogram<'model'>;
  readonly totalLatency: Histogram<'model'>;
  readonly resultOverhead: Histogram;
  readonly tickLateness: Histogram;
  readonly ticksSkipped: Counter<'reason'>;
  readonly mediaWorkerRestarts: Counter<'reason'>;
  readonly rateLimited: Counter<'event'>;
  readonly socketsOpened: Counter;
  readonly socketsShed: Counter;
  readonly resultsRepeated: Counter;
  readonly upstreamErrors: Counter<'source' | 'status'>;
  readonly legacyRefusals: Counter<'reason' | 'kind'>;
  readonly fleetReplicas: Gauge;
  readonly fleetOwnedStreams: Gauge;
  readonly fleetAdoptions: Counter<'how'>;
  readonly fleetFencedTicks: Counter<'reason'>;
  readonly storeCommands: Histogram<'op'>;
  readonly storeErrors: Counter<'op'>;
  private readonly drainActive: Gauge;
  private readonly drainHeld: Gauge<'kind'>;
  private readonly drainSecondsLeft: Gauge;
  /** Store operations seen (their error series start at 0 on an op's first call). */
  private readonly storeOps = new Set<string>();
  private readonly scrapeHooks: (() => void)[] = [];
  constructor(sources: MetricsSources, opts: { defaultMetrics?: boolean } = {}) {
    const registers = [this.registry];
    // Event-loop delay sampled every 100 ms (prom-client's default, 10 ms, wakes an idle process
    // 100 times a second); a stall longer than 100 ms is still always seen.
    if (opts.defaultMetrics !== false) collectDefaultMetrics({ register: this.registry, eventLoopMonitoringPrecision: 100 });

    this.httpRequests = new Counter({
      name: 'gateway_http_requests_total',
      help: 'HTTP requests by method, route template and status (499: the client went away first)',
      labelNames: ['method', 'route', 'status'],
      registers,
    });
    this.httpDuration = new Histogram({
      name: 'gateway_http_request_duration_seconds',
      help: 'Time from request to the end of the response, by route template',
      labelNames: ['method', 'route'],
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.passthroughRequests = new Counter({
      name: 'gateway_passthrough_requests_total',
      help: '/v1beta and /billing requests passed through, by outcome (ok, client_abort, upstream_unreachable, upstream_timeout, upstream_reset, bad_path)',
      labelNames: ['prefix', 'outcome'],
      registers,
    });
    this.passthroughUpstreamHeaders = new Histogram({
      name: 'gateway_passthrough_upstream_headers_seconds',
      help: 'Time until the upstream answered with headers (time to first byte seen by the gateway)',
      labelNames: ['prefix'],
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.legacyRequests = new Counter({
      name: 'gateway_legacy_requests_total',
      help: 'Authenticated /v0.2 requests and results-socket connections, by endpoint (deprecated usage)',
      labelNames: ['endpoint'],
      registers,
    });
    this.streamsCreated = new Counter({
      name: 'gateway_legacy_streams_created_total',
      help: 'Legacy streams created, by media source and processing mode',
      labelNames: ['source', 'mode'],
      registers,
    });
    this.streamsEnded = new Counter({
      name: 'gateway_legacy_streams_ended_total',
      help: 'Legacy streams ended, by end reason',
      labelNames: ['reason'],
      registers,
    });
    for (const reason of sources.endReasons ?? []) this.streamsEnded.inc({ reason }, 0);
    this.deprecatedFields = new Counter({
      name: 'gateway_legacy_deprecated_fields_total',
      help: 'Legacy streams created with a deprecated request field (webrtc, sampling_ratio, fps)',
      labelNames: ['field'],
      registers,
    });
    this.inferences = new Counter({
      name: 'gateway_legacy_inferences_total',
      help: 'Scheduled legacy inferences, by answering model and outcome (ok, error)',
      labelNames: ['model', 'outcome'],
      registers,
    });
    this.outputTokens = new Counter({
      name: 'gateway_legacy_output_tokens_total',
      help: 'Completion tokens of legacy inferences, by model',
      labelNames: ['model'],
      registers,
    });
    this.inferenceLatency = new Histogram({
      name: 'gateway_legacy_inference_latency_seconds',
      help: 'Upstream chat-completion time of a legacy inference (retries and fallbacks included)',
      labelNames: ['model'],
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.totalLatency = new Histogram({
      name: 'gateway_legacy_total_latency_seconds',
      help: 'From the tick being due to the result being published (total_latency_ms of results)',
      labelNames: ['model'],
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.resultOverhead = new Histogram({
      name: 'gateway_legacy_result_overhead_seconds',
      help: "The gateway's own time between an upstream answer and the published result",
      buckets: SMALL_BUCKETS,
      registers,
    });
    this.tickLateness = new Histogram({
      name: 'gateway_legacy_tick_lateness_seconds',
      help: 'How late scheduler ticks fire against their due time',
      buckets: SMALL_BUCKETS,
      registers,
    });
    this.ticksSkipped = new Counter({
      name: 'gateway_legacy_ticks_skipped_total',
      help:
        'Scheduler ticks that ran no inference, by reason: in_flight_limit (legacy.maxInFlight completions of the stream still running), ' +
        'late (due while the process was paused or saturated for more than a period: dropped, not replayed), ' +
        'self_fenced (the replica lost its store heartbeat)',
      labelNames: ['reason'],
      registers,
    });
    this.mediaWorkerRestarts = new Counter({
      name: 'gateway_media_worker_restarts_total',
      help:
        'The media worker forked again, by why it went: signal (killed: a native crash, the OOM killer), exit (it exited), ' +
        'stall (silent too long: killed), recycle (past legacy.mediaWorker.recycleRssMb: replaced)',
      labelNames: ['reason'],
      registers,
    });
    this.rateLimited = new Counter({
      name: 'gateway_legacy_rate_limited_total',
      help: 'Upstream 429s met by ticks (limited), and ticks skipped while their key was held back by one (tick_skipped)',
      labelNames: ['event'],
      registers,
    });
    this.socketsOpened = new Counter({
      name: 'gateway_ws_connections_total',
      help: 'Results sockets authenticated and attached to a stream',
      registers,
    });
    this.socketsShed = new Counter({
      name: 'gateway_ws_messages_shed_total',
      help: 'Result messages dropped for a slow results-socket consumer',
      registers,
    });
    this.resultsRepeated = new Counter({
      name: 'gateway_legacy_results_repeated_total',
      help: 'Results not delivered because their id was delivered already (a tick run again after a store failover)',
      registers,
    });
    this.upstreamErrors = new Counter({
      name: 'gateway_upstream_errors_total',
      help: 'Upstream failures by source (legacy adapter, passthrough) and status (0: no answer)',
      labelNames: ['source', 'status'],
      registers,
    });
    this.legacyRefusals = new Counter({
      name: 'gateway_legacy_refusals_total',
      help: 'Legacy creates and results sockets refused by a brownout window or after the sunset',
      labelNames: ['reason', 'kind'],
      registers,
    });
    this.fleetReplicas = new Gauge({
      name: 'gateway_fleet_replicas',
      help: "Replicas alive (heartbeat in the shared store) at this replica's last membership sweep",
      registers,
    });
    this.fleetOwnedStreams = new Gauge({
      name: 'gateway_fleet_owned_sessions',
      help: 'Legacy streams this replica schedules (owns) now',
      registers,
    });
    this.fleetAdoptions = new Counter({
      name: 'gateway_fleet_adoptions_total',
      help: 'Streams this replica took over: failover (their owner died) or handover (their owner handed them over: in its drain, leaving, or cut from the upstream)',
      labelNames: ['how'],
      registers,
    });
    this.fleetFencedTicks = new Counter({
      name: 'gateway_fleet_fenced_ticks_total',
      help: 'Tick results the store refused to publish: fenced (another owner or epoch), duplicate, ended, missing (the store lost the record)',
      labelNames: ['reason'],
      registers,
    });
    this.storeCommands = new Histogram({
      name: 'gateway_store_command_seconds',
      help: 'Time of each store call (Redis: the round trip), by Store operation',
      labelNames: ['op'],
      buckets: STORE_BUCKETS,
      registers,
    });
    this.storeErrors = new Counter({
      name: 'gateway_store_errors_total',
      help: 'Store calls that failed (Redis unreachable, timed out, refused), by Store operation',
      labelNames: ['op'],
      registers,
    });
    // Known label values start at 0, so rate() and alerts see the series before the first event.
    for (const how of ['failover', 'handover']) this.fleetAdoptions.inc({ how }, 0);
    for (const reason of ['in_flight_limit', 'late', 'self_fenced']) this.ticksSkipped.inc({ reason }, 0);
    for (const reason of ['signal', 'exit', 'stall', 'recycle']) this.mediaWorkerRestarts.inc({ reason }, 0);
    for (const reason of ['fenced', 'duplicate', 'ended', 'missing']) this.fleetFencedTicks.inc({ reason }, 0);
    for (const reason of ['brownout', 'sunset']) for (const kind of ['create', 'socket']) this.legacyRefusals.inc({ reason, kind }, 0);
    this.drainActive = new Gauge({
      name: 'gateway_drain_active',
      help: 'Whether this replica is in the drain after SIGTERM, the holding state (1), or not (0)',
      registers,
    });
    this.drainHeld = new Gauge({
      name: 'gateway_drain_held_connections',
      help: 'Connections a replica in the drain (holding) still holds, by kind (socket: results sockets, relay: media relays); 0 outside the drain',
      labelNames: ['kind'],
      registers,
    });
    this.drainSecondsLeft = new Gauge({
      name: 'gateway_drain_seconds_left',
      help: 'Seconds left to the drain deadline (server.drainTimeoutMs); 0 outside the drain',
      registers,
    });
    this.drainState({ draining: false, sockets: 0, relays: 0, secondsLeft: 0 });
    if (sources.sunsetMs !== undefined) {
      new Gauge({
        name: 'gateway_deprecation_sunset_timestamp_seconds',
        help: 'The announced sunset of /v0.2 (deprecation.sunset), seconds since the epoch',
        registers,
      }).set(sources.sunsetMs / 1000);
    }
    this.observe(sources);
  }

  /** Creates the gauge of each source given (each source once). */
  observe(sources: ScrapedSources): void {
    const registers = [this.registry];
    const countGauge = (name: string, help: string, read: () => number) =>
      new Gauge({
        name,
        help,
        registers,
        collect() {
          this.set(read());
        },
      });
    if (sources.activeStreams) countGauge('gateway_legacy_streams_active', 'Legacy streams running in this process', sources.activeStreams);
    if (sources.socketConnections)
      countGauge('gateway_ws_connections', 'Open results sockets (/v0.2/ws/streams/{id}) in this process', sources.socketConnections);
    if (sources.upstreamImpaired) {
      countGauge(
        'gateway_fleet_upstream_impaired',
        'Fleet: 1 while this replica cannot reach the upstream and hands its streams to replicas that can',
        sources.upstreamImpaired,
      );
    }
    if (sources.mediaWorker) {
      const read = sources.mediaWorker;
      const gauge = (name: string, help: string, pick: (w: ReturnType<typeof read>) => number) =>
        new Gauge({
          name,
          help,
          registers,
          collect() {
            this.set(pick(read()));
          },
        });
      gauge(
        'gateway_media_worker_up',
        'Whether the media worker (customer-room relays, relay-mode webrtc) runs now (1) or not (0: never needed yet, restarting, or given up)',
        (w) => Number(w.up),
      );
      gauge('gateway_media_worker_resident_memory_bytes', "The media worker's resident memory, as of its last report", (w) => w.rssBytes);
      gauge('gateway_media_worker_heap_used_bytes', "The media worker's V8 heap in use, as of its last report", (w) => w.heapUsedBytes);
      gauge('gateway_media_worker_cpu_seconds', 'CPU time the current media worker has used (user + system)', (w) => w.cpuSeconds);
      gauge('gateway_media_worker_relays', 'Relays the media worker carries for this replica', (w) => w.relays);
    }
    if (sources.upstreamUp) {
      const up = sources.upstreamUp;
      new Gauge({
        name: 'gateway_upstream_up',
        help: 'Whether the upstream answered its model list at the last periodic probe (1) or not (0)',
        registers,
        collect() {
          const v = up();
          if (v === undefined) this.reset();
          else this.set(v);
        },
      });
    }
    if (sources.deprecatedKeys) {
      const count = sources.deprecatedKeys;
      new Gauge({
        name: 'gateway_deprecated_api_keys',
        help: 'Distinct API keys that used /v0.2 (from the deprecation counters in the store)',
        registers,
        async collect() {
          this.set(await count().catch(() => 0));
        },
      });
    }
    if (sources.migrationStatuses) {
      const read = sources.migrationStatuses;
      let last = Object.fromEntries(MIGRATION_STATUSES.map((s) => [s, 0])) as Record<string, number>;
      let readAt = -Infinity;
      let reading: Promise<void> | undefined;
      // One store read per MIGRATION_REFRESH_MS shared by concurrent scrapes; a failed read keeps the last figures.
      const refresh = () =>
        (reading ??= read()
          .then(
            (counts) => void (last = { ...last, ...counts }),
            () => undefined,
          )
          .finally(() => {
            readAt = Date.now();
            reading = undefined;
          }));
      new Gauge({
        name: 'gateway_migration_keys',
        help: 'API keys that used /v0.2, by migration status (fleet-wide, from the store; refreshed at most once a minute)',
        labelNames: ['status'],
        registers,
        async collect() {
          if (Date.now() - readAt >= MIGRATION_REFRESH_MS) await refresh();
          for (const [status, n] of Object.entries(last)) this.set({ status }, n);
        },
      });
    }
  }

  /** Store calls by operation, fed by the measured store (src/gateway/store/measured.ts). */
  readonly store: StoreCallSink = {
    call: (op, seconds, failed) => {
      if (!this.storeOps.has(op)) {
        this.storeOps.add(op);
        this.storeErrors.inc({ op }, 0); // the series exists from the op's first call: rate() and alerts see 0, not nothing
      }
      this.storeCommands.observe({ op }, seconds);
      if (failed) this.storeErrors.inc({ op });
    },
  };

  /** What a draining replica still holds; the drain's poll reports it (not draining: all 0). */
  drainState(s: DrainState): void {
    this.drainActive.set(s.draining ? 1 : 0);
    this.drainHeld.set({ kind: 'socket' }, s.draining ? s.sockets : 0);
    this.drainHeld.set({ kind: 'relay' }, s.draining ? s.relays : 0);
    this.drainSecondsLeft.set(s.draining ? Math.max(0, s.secondsLeft) : 0);
  }

  contentType(): string {
    return this.registry.contentType;
  }

  /** `hook` runs before every scrape: a caller that holds observations back hands them over first. */
  beforeScrape(hook: () => void): void {
    this.scrapeHooks.push(hook);
  }

  text(): Promise<string> {
    for (const hook of this.scrapeHooks) hook();
    return this.registry.metrics();
  }
}

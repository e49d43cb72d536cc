/**
 * Configuration: one zod schema, resolved once at boot.
 * Precedence (later wins): schema defaults → config/default.json → --config FILE → environment.
 * Every key is documented in docs/configuration.md; a bad value fails at boot naming the key.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { validate as validCron } from 'node-cron';
import { z } from 'zod';
import { isRedisUrl } from './lib/redis-url';
import { parseTrustProxy } from './lib/client-address';
import type { TrustProxy } from './lib/client-address';

const port = z.number().int().min(0).max(65535);
const positive = z.number().positive();
const positiveInt = z.number().int().positive();
/** A host name, IP address or `host:port` (lower case), as allow-lists of hosts take them. */
const hostName = z
  .string()
  .min(1)
  .transform((h) => h.toLowerCase())
  .refine(
    (h) => /^(\[[0-9a-f:.]+\]|[a-z0-9.-]+)(:\d{1,5})?$/.test(h),
    'must be a host name, an IP address or host:port (IPv6 in brackets)',
  );
/** A URL fit to show customers: no userinfo, query or fragment. */
const publicOnly = (u: URL) => !u.username && !u.password && !u.search && !u.hash;
const brandToken = z.string().regex(/^[a-z][a-z0-9]*$/, 'lowercase letters and digits, starting with a letter');

const pricingSchema = z.strictObject({
  input_microcents_per_token: z.number().int().min(0),
  output_microcents_per_token: z.number().int().min(0),
  cached_input_microcents_per_token: z.number().int().min(0),
  version: z.string().default('2025-01-01'),
  public: z.boolean().default(true),
});

/** An emulated model's answer time: log-normal (median, p99) plus a part per frame (src/emulator/models/latency.ts). */
const latencySchema = z
  .strictObject({
    medianMs: z.number().min(0).max(600_000).default(0),
    p99Ms: z.number().min(0).max(600_000).default(0),
    perFrameMs: z.number().min(0).max(60_000).default(0),
  })
  .refine((l) => l.p99Ms === 0 || l.p99Ms >= l.medianMs, { message: 'p99Ms must be at least medianMs', path: ['p99Ms'] });

const modelSchema = z
  .strictObject({
    /** `provider/model-name`, or a bare name (`gemini-3-flash-preview`) with `provider` set. */
    id: z.string().regex(/^[^/\s]+(\/\S+)?$/, 'must look like provider/model-name or a bare model name (no spaces, not starting with /)'),
    /** The pricing object's `provider`; defaults to the id's part before the slash. */
    provider: z.string().regex(/^\S+$/, 'no spaces').optional(),
    /** `analyzer`: the built-in pixel analyzer. `openai`: forwards to an OpenAI-compatible vision server. */
    backend: z.enum(['analyzer', 'openai']).default('analyzer'),
    status: z.enum(['ready', 'unavailable']).default('ready'),
    /** Analyzer detail: `full` describes colour, brightness and motion; `mini` only counts. */
    variant: z.enum(['full', 'mini']).default('full'),
    owned_by: z.string().optional(),
    /** For backend `openai`: base URL (…/v1), remote model name and optional key. */
    baseUrl: z.string().url().optional(),
    remoteModel: z.string().optional(),
    apiKey: z.string().optional(),
    timeoutMs: positiveInt.default(60_000),
    /** How long this model takes to answer (over `emulator.modelLatency`, which every other model takes). */
    latency: latencySchema.optional(),
    pricing: pricingSchema,
  })
  .refine((m) => m.id.includes('/') || m.provider !== undefined, {
    message: 'a model id without a slash needs `provider` (the provider its pricing names)',
    path: ['provider'],
  });

const accountSchema = z.strictObject({
  id: z.string().uuid(),
  name: z.string().min(1),
  balance_microcents: z.number().int().min(0),
  keys: z.array(z.strictObject({ key: z.string().min(1), revoked: z.boolean().default(false) })).min(1),
});

const emulatorSchema = z.strictObject({
  port: port.default(8081),
  host: z.string().default('127.0.0.1'),
  /** Base URL clients use to reach the emulator (defaults to http://host:port). The room URL derives from it. */
  publicUrl: z.string().url().optional(),
  region: z.enum(['us-west1', 'us-central1']).default('us-west1'),
  leaseTtlSeconds: positiveInt.default(300),
  tombstoneSeconds: z.number().min(0).default(60),
  frameRetentionSeconds: positive.default(600),
  /** Per-stream memory cap for stored frames (bytes of JPEG). */
  maxFrameBytesPerStream: positiveInt.default(256 * 1024 * 1024),
  /** Frames are kept as JPEG downscaled to at most this width. */
  frameStoreWidth: positiveInt.default(320),
  jpegQuality: z.number().int().min(1).max(100).default(70),
  /** Window of the `recent_fps` metric. */
  fpsWindowMs: positiveInt.default(5000),
  tokensPerFrame: positiveInt.default(256),
  /** Request field that overrides tokensPerFrame per request (its real name is not published). */
  tokensPerFrameField: z.string().min(1).default('tokens_per_frame'),
  /** Characters per text token in the usage estimate. */
  charsPerToken: positiveInt.default(4),
  maxBodyBytes: positiveInt.default(1024 * 1024),
  /** Unset: off for `emulator`, on for the emulator `serve` embeds; set, it is honoured by both. */
  controlApi: z.boolean().optional(),
  autoPublish: z
    .strictObject({
      /** Unset: off for `emulator`, on for the emulator `serve` embeds; set, it is honoured by both. */
      enabled: z.boolean().optional(),
      fps: positive.max(60).default(5),
      width: positiveInt.default(320),
      height: positiveInt.default(240),
    })
    .prefault({}),
  room: z
    .strictObject({
      apiKey: z.string().min(1).default('emulator-room-key'),
      apiSecret: z.string().min(32).default('emulator-room-secret-0123456789abcdef'),
      tokenTtlSeconds: positiveInt.default(600),
      /** WHIP publishing at `<room>/whip/v1`, as LiveKit servers 1.9+ serve it (src/emulator/room/README.md). */
      whip: z
        .strictObject({
          enabled: z.boolean().default(true),
          /** ICE servers named to WHIP clients in `Link` headers (the room's own peers use none). */
          iceServers: z
            .array(
              z.strictObject({
                urls: z.array(z.string().min(1)).min(1),
                username: z.string().optional(),
                credential: z.string().optional(),
              }),
            )
            .default([]),
        })
        .prefault({}),
    })
    .prefault({}),
  accounts: z.array(accountSchema).default([]),
  models: z.array(modelSchema).default([]),
  /** How long every model takes to answer, unless it has a `latency` of its own (default: at once). */
  modelLatency: latencySchema.prefault({}),
  /** Seed of the latency draws: the same seed, the same sequence of answer times. */
  modelLatencySeed: z.number().int().default(1),
  /**
   * Where the contract (spec/interface.md) and the provider's own reference disagree about /v1beta,
   * which one the emulator follows (src/emulator/README.md lists each difference).
   */
  dialect: z.enum(['contract', 'provider']).default('contract'),
  /** `POST /billing/checkout` and the hosted page it hands out. */
  checkout: z
    .strictObject({
      /** How long a checkout URL can be paid. */
      sessionTtlSeconds: positiveInt.default(86_400),
      /** Unpaid and paid sessions remembered at most (the oldest are forgotten first). */
      maxSessions: positiveInt.default(10_000),
    })
    .prefault({}),
  /** `image_url` parts with an http(s) URL: fetched only from these hosts, bounded in size and time. */
  imageFetch: z
    .strictObject({
      /** Host names or `host:port` the emulator may fetch images from; empty: none (every http(s) image URL is refused). */
      allowedHosts: z.array(hostName).max(100).default([]),
      maxBytes: positiveInt.max(64 * 1024 * 1024).default(10 * 1024 * 1024),
      timeoutMs: positiveInt.max(120_000).default(5000),
    })
    .prefault({}),
  /** Streams created with `source: {type: "rtsp" | "hls", url}` (camera sources). */
  cameraSources: z
    .strictObject({
      /** Hosts accepted even when they resolve to a private, loopback or link-local address (tests, a lab camera). */
      allowedHosts: z.array(hostName).max(100).default([]),
      /** How long the reachability check (a TCP connect to the source's host and port) may take. */
      connectTimeoutMs: positiveInt.max(60_000).default(3000),
    })
    .prefault({}),
  /** Per-user request limit of chat completions, in requests per second (0: off, as the contract has no 429 on /v1beta). */
  rateLimit: z
    .strictObject({
      completionsPerSecond: z.number().int().min(0).default(0),
      /** Who shares one limit: an account (the provider's "per-user") or each API key. */
      per: z.enum(['account', 'key']).default('account'),
    })
    .prefault({}),
  /** An active stream with no frame for this long (from its last frame, or its creation) ends `reaped`. 0: never. */
  reapIdleSeconds: z.number().int().min(0).default(0),
});

const relaySchema = z.strictObject({
  /** Cap on frames relayed per second per stream, whatever the session asks for. */
  maxFps: positive.max(60).default(30),
  /** Floor of the frame-mode relay rate (keeps the newest upstream frame fresh on long intervals). */
  minFps: positive.max(60).default(1),
  /** Frame mode: frames relayed per `interval_seconds` (the tick reads the newest one). */
  framesPerInterval: positive.max(30).default(2),
  /** How long the webrtc answer waits for ICE gathering before it is sent with what it has. */
  iceGatheringTimeoutMs: positiveInt.default(3000),
  /** A webrtc peer that has not connected (ICE + DTLS) this long after the answer is lost. */
  connectTimeoutMs: positiveInt.default(20_000),
  /** How long a webrtc peer may stay ICE-`disconnected` before it counts as lost. */
  disconnectGraceMs: positiveInt.default(5000),
  /**
   * A connected webrtc peer from which nothing (media, RTCP) arrived this long is lost: how a
   * closed page is noticed (libwebrtc alone takes ~17 s).
   */
  peerSilenceMs: positiveInt.min(1000).default(5000),
});

/** How legacy webrtc sources reach the upstream's room (src/gateway/ingest/README.md). */
const webrtcSchema = z.strictObject({
  /**
   * `whip`: the client's own offer is published into the upstream's room over WHIP, so the media
   * flows client → room and never through the gateway. `relay`: the gateway answers the offer
   * itself and republishes the frames (for a room without WHIP; needs UDP or a TURN server).
   */
  mode: z.enum(['whip', 'relay']).default('whip'),
  /** WHIP: how long the upstream's room may take to answer an offer (it answers after its ICE gathering). */
  answerTimeoutMs: positiveInt.max(60_000).default(10_000),
  /** WHIP: how often the stream's owner reads the upstream stream's frames. */
  frameCheckMs: positiveInt.min(100).default(2000),
  /** WHIP: no new frame upstream for this long → the client is gone (`webrtc_disconnected`). */
  framesLostMs: positiveInt.min(1000).default(10_000),
  /** WHIP: no first frame upstream this long after the answer → the client never connected (`webrtc_disconnected`). */
  firstFrameTimeoutMs: positiveInt.min(1000).default(20_000),
  /** Relay: ICE servers of the gateway's own peer connections (host candidates only when empty). */
  iceServers: z
    .array(
      z.strictObject({
        urls: z.union([z.string(), z.array(z.string())]),
        username: z.string().optional(),
        credential: z.string().optional(),
      }),
    )
    .default([]),
});

/** The supervised child process the media relay runs in (src/gateway/ingest/worker-relay.ts). */
const mediaWorkerSchema = z.strictObject({
  /** Restarts in a minute: a worker that dies once more is not forked again for `failedCooldownMs` (its streams end; /readyz 503). */
  maxRestartsPerMinute: positiveInt.max(100).default(5),
  /** How long a worker that died too often stays down before a relay may fork one again. */
  failedCooldownMs: positiveInt.min(1000).default(60_000),
  /** A worker silent this long (it reports every second) is stuck: SIGKILLed and restarted. */
  stallMs: positiveInt.min(2000).default(10_000),
  /** The first restart's delay, doubled after each death up to `restartMaxMs`. */
  restartMinMs: positiveInt.default(500),
  restartMaxMs: positiveInt.default(10_000),
  /** A relay whose upstream publisher stays disconnected this long is ended (`<vendor>_disconnected`). */
  relayStallMs: positiveInt.min(1000).default(30_000),
  /**
   * A worker whose RSS passes this (MiB) is replaced while it carries no relayed webrtc peer: rtc-node
   * keeps native memory of every room it left (livekit/node-sdks#514). 0: never.
   */
  recycleRssMb: z.number().int().min(0).default(512),
});

const legacySchema = z.strictObject({
  leaseTtlSeconds: positiveInt.default(45),
  maxStreamsPerKey: positiveInt.default(5),
  maxTokensPerSecond: positive.default(128),
  tombstoneSeconds: z.number().min(0).default(300),
  /**
   * Completions in flight per stream: a tick due while the previous one still runs starts anyway, up
   * to this many (results still commit in tick order); a tick that finds this many running is
   * skipped. 3 covers a hosted model's p99 (~2.8 s) at a 1 s interval.
   */
  maxInFlight: positiveInt.max(16).default(3),
  /** Models tried, in order, after the requested one fails with 503 or a network error. */
  /** Unset: every model the upstream lists, in its order (only `ready` ones are tried); `[]`: none. */
  fallbackModels: z.array(z.string()).optional(),
  /** How often the gateway renews the upstream lease (must be well inside its 300 s). */
  upstreamKeepaliveSeconds: positive.default(60),
  /** How often the scheduler polls the upstream stream for its first frame. */
  firstFramePollMs: positiveInt.default(250),
  wsAuthTimeoutMs: positiveInt.default(10_000),
  wsHeartbeatMs: positiveInt.default(30_000),
  wsMaxPayloadBytes: positiveInt.default(16 * 1024),
  /** Bytes buffered for one slow socket before its messages are shed. */
  wsMaxBufferedBytes: positiveInt.default(1024 * 1024),
  /**
   * After a client's DELETE, how long its stream's sockets stay open before they close 1001
   * `client_requested`: a client that DELETEs, awaits the answer, then closes its own socket (browser
   * SDK 2.x's stop()) closes first and sees no close from the server.
   */
  stopGraceMs: z.number().int().min(0).max(60_000).default(1000),
  modelsCacheMs: z.number().int().min(0).default(5000),
  /** Upstream failure handling of the legacy paths (docs/errors.md "Upstream failures"). */
  upstreamFailures: z
    .strictObject({
      /** A completion attempt may take this many stream intervals (at least 1 s, at most requestTimeoutMs). */
      attemptTimeoutIntervals: positive.default(2),
      /** A tick gives up (error result) after this many stream intervals (at least 2 s). */
      tickDeadlineIntervals: positive.default(4),
      /** How long a key the upstream refused is refused without asking again. 0 = no negative cache. */
      negativeKeyCacheMs: z.number().int().min(0).default(10_000),
      /** Keys held in the negative cache (least recently used dropped first). */
      negativeKeyCacheSize: positiveInt.default(10_000),
      /**
       * Failed authentications (HTTP 401 and results-socket 1008) one client address
       * (`server.trustProxy`) may have per minute; a key accepted in the last 5 minutes is never
       * refused by it. 0 = no limit.
       */
      authFailuresPerMinute: z.number().int().min(0).default(30),
    })
    .prefault({}),
  /** Relay mode: the `turn_servers` of a webrtc create response (over WHIP, the room's own `Link` servers are). */
  turnServers: z.array(z.strictObject({ urls: z.string(), username: z.string(), credential: z.string() })).default([]),
  webrtc: webrtcSchema.prefault({}),
  /** The gateway's media relay (customer-room sources, and webrtc in relay mode → the upstream room); see src/gateway/ingest/README.md. */
  relay: relaySchema.prefault({}),
  mediaWorker: mediaWorkerSchema.prefault({}),
  /**
   * Feedback one tenant may keep (entries are at most 4 KiB of text) and the list endpoint's page
   * size (default = the account cap, so an unchanged legacy client still sees every entry; pages
   * are opt-in).
   */
  feedback: z
    .strictObject({
      perStream: positiveInt.default(50),
      perAccount: positiveInt.default(1000),
      pageSize: positiveInt.default(1000),
      maxPageSize: positiveInt.default(1000),
    })
    .prefault({}),
  /**
   * How long a delivered result stays re-runnable (reinfer, `POST /v0.2/chat/completions/clip`):
   * its window is kept this long; the upstream keeps frames about 10 minutes.
   */
  resultWindowSeconds: positiveInt.default(600),
});

const instant = z.string().refine((s) => !Number.isNaN(Date.parse(s)), 'must be an ISO 8601 date or date-time');
const timezone = z.string().refine((tz) => {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: tz });
    return true;
  } catch {
    return false;
  }
}, 'must be an IANA time zone such as UTC or Europe/Berlin');

const keyHashList = z.array(z.string().regex(/^[0-9a-f]{16}$/, 'must be a key hash (16 hex digits, as in the report)')).max(10_000);

/** Brownouts: windows in which legacy creates (and optionally results sockets) are refused with 503. */
const brownoutSchema = z.strictObject({
  /** Recurring windows: a window opens at each match of `cron` (node-cron syntax) and lasts `durationMinutes`. */
  schedule: z
    .array(
      z.strictObject({
        cron: z.string().refine((e) => validCron(e), 'not a valid cron expression'),
        // Bounded: checking a window scans up to one duration of cron minutes; longer brownouts are explicit windows.
        durationMinutes: z.number().int().min(1).max(240),
        timezone: timezone.default('UTC'),
      }),
    )
    .max(10)
    .default([]),
  /** One-off windows, `start` inclusive, `end` exclusive. */
  windows: z
    .array(
      z
        .strictObject({ start: instant, end: instant })
        .refine((w) => Date.parse(w.end) > Date.parse(w.start), { message: 'end must be after start', path: ['end'] }),
    )
    .max(500)
    .default([]),
  /** Also refuse new results-socket connections (close 1013); running streams keep theirs. */
  sockets: z.boolean().default(false),
  /** Share of keys browned out, chosen deterministically by key hash (0.1 → the same 10% every window). */
  share: z.number().min(0).max(1).default(1),
  /** Only these key hashes are browned out (empty: every key, subject to `share`). */
  onlyKeys: keyHashList.default([]),
  /** Key hashes never browned out (an allowlist for customers with an agreed extension). */
  exemptKeys: keyHashList.default([]),
});
/** The shipped deprecation dates: placeholders an operator must replace (boot warns while they are in use). */
export const DEFAULT_DEPRECATION = { date: '2026-01-01T00:00:00Z', sunset: '2026-12-31T00:00:00Z' } as const;

/** What every /v0.2 response (and results-socket upgrade) announces: RFC 9745, RFC 8594, RFC 8288. */
const deprecationSchema = z
  .strictObject({
    /** When /v0.2 was deprecated: `Deprecation: @<unix seconds>`. */
    date: instant.default(DEFAULT_DEPRECATION.date),
    /** When /v0.2 stops: `Sunset: <IMF-fixdate>`; not earlier than `date`. */
    sunset: instant.default(DEFAULT_DEPRECATION.sunset),
    /** Migration guide: `Link: <link>; rel="deprecation"`. The default is the guide this gateway serves. */
    link: z.string().min(1).default('/docs/migration'),
    /** From `sunset` on: keep serving, refuse creates with 410, or keep refusing only in brownout windows. */
    afterSunset: z.enum(['serve', 'refuse', 'brownout']).default('serve'),
    brownouts: brownoutSchema.prefault({}),
  })
  .refine((d) => Date.parse(d.sunset) >= Date.parse(d.date), { message: 'must not be earlier than deprecation.date', path: ['sunset'] });

const adminSchema = z.strictObject({
  /** Bearer token of the /admin endpoints; unset → they answer 404. */
  token: z.string().min(16, 'use at least 16 characters').optional(),
});

/**
 * Timeouts of the HTTP servers (gateway and emulator), set deliberately rather than left to Node's
 * defaults. Responses in progress (SSE, long polls) and upgraded sockets (WebSocket) are never cut
 * by them: those have their own limits (requestTimeoutMs, the socket heartbeat).
 */
const serverSchema = z
  .strictObject({
    /** Time to receive a request's headers (slowloris); also closes a connection that never sends one. */
    headersTimeoutMs: positiveInt.default(15_000),
    /** Time to receive a whole request, body included (0: no limit). Must be >= headersTimeoutMs. */
    requestTimeoutMs: z.number().int().min(0).default(120_000),
    /** How long an idle keep-alive connection is kept after a response (above common load-balancer idle timeouts; Node adds 1 s). */
    keepAliveTimeoutMs: positiveInt.default(65_000),
    /** A connection with no request in progress and no traffic this long is closed. */
    idleTimeoutMs: positiveInt.default(75_000),
    /**
     * The drain deadline: on SIGTERM a replica keeps what it still holds (results sockets, media
     * relays) at most this long before it cuts them. Orchestrators must wait longer (Kubernetes
     * `terminationGracePeriodSeconds` above this plus `shutdownDelayMs`; deploy/kubernetes).
     */
    drainTimeoutMs: positiveInt.default(3_600_000),
    /**
     * Proxies whose `X-Forwarded-For` names the client (Express's `trust proxy` semantics): false
     * (off: the client is the socket's peer), a hop count, or addresses / CIDRs / named ranges.
     * Unset is off too; a fleet warns at boot while it is unset.
     */
    trustProxy: z
      .union([z.boolean(), z.number(), z.string(), z.array(z.string())])
      .optional()
      .transform((v, ctx): TrustProxy | undefined => {
        try {
          return v === undefined ? undefined : parseTrustProxy(v);
        } catch (err) {
          ctx.addIssue({ code: 'custom', message: (err as Error).message });
          return z.NEVER;
        }
      }),
  })
  .refine((s) => s.requestTimeoutMs === 0 || s.requestTimeoutMs >= s.headersTimeoutMs, {
    message: 'must be 0 or at least server.headersTimeoutMs',
    path: ['requestTimeoutMs'],
  });

/** Which browser origins may call /v0.2 and /healthz (no CORS anywhere else). */
const corsSchema = z.strictObject({
  /** Allowed `Origin` values; `*` allows any. Empty: no CORS headers at all. */
  origins: z.array(z.string().min(1)).default(['*']),
  /**
   * Allow credentialed requests (the origin is echoed; `null` never is). On by default: legacy browser
   * SDKs call with `credentials: "include"` (spec/legacy-clients.md), and the gateway authenticates by
   * bearer header only (no cookies), so credentials carry no ambient authority.
   */
  credentials: z.boolean().default(true),
});

const telemetrySchema = z.strictObject({
  /** When the deprecation counters are rolled up and a summary is logged (node-cron syntax). */
  rollupCron: z
    .string()
    .refine((e) => validCron(e), 'not a valid cron expression')
    .default('5 0 * * *'),
  rollupTimezone: timezone.default('UTC'),
  /** Serve Prometheus metrics at /metrics. */
  metrics: z.boolean().default(true),
  /** Serve /metrics on this port of `host` only (not on the public port). */
  metricsPort: port.optional(),
  /** Bearer token /metrics asks for. */
  metricsToken: z.string().min(16, 'use at least 16 characters').optional(),
  /** How often the upstream's model list is probed for the `gateway_upstream_up` gauge. */
  upstreamProbeMs: positiveInt.default(15_000),
  /** One access-log line per HTTP request (pino-http). */
  requestLog: z.boolean().default(true),
});

/** The shared store of a fleet of replicas (docs/scaling.md). No redisUrl → the in-process memory store. */
const storeSchema = z.strictObject({
  /** redis://, rediss:// or redis+cluster://host:port,… URL of the fleet's Redis; selects the Redis store. */
  redisUrl: z
    .string()
    .refine(
      isRedisUrl,
      'use a redis://, rediss://, redis+cluster://host:port,host:port or redis+sentinel://host:port,host:port/<master name> URL',
    )
    .optional(),
  /** Names this replica in the fleet (logs, later ownership). */
  gatewayId: z.string().min(1).max(200).default(`${os.hostname()}:${process.pid}`),
  /** Shared by every replica (required with redisUrl): protects what the fleet shares to act for a session. */
  secret: z.string().min(32, 'use at least 32 characters').optional(),
  /**
   * How long a replica gathers tick commits into one Redis script call: what a result may wait
   * before it is published, traded for fewer commands (docs/scaling.md). 0: one event-loop turn.
   */
  commitBatchMs: z.number().int().min(0).max(100).default(10),
  /** Timing of the fleet's membership, failover and reconciling (src/gateway/fleet, docs/scaling.md). */
  fleet: z
    .strictObject({
      /** How often this replica records that it is alive. */
      heartbeatMs: positiveInt.default(1000),
      /** How often it reads the membership and takes over a dead replica's streams. */
      sweepMs: positiveInt.default(500),
      /** Silence after which a replica counts as dead and its streams fail over. */
      deadAfterMs: positiveInt.default(3000),
      /** A replica whose own heartbeat has not succeeded for this long stops ticking (self-fencing). */
      fenceAfterMs: positiveInt.default(2500),
      /** How long replicas other than the rendezvous pick wait before claiming a dead replica's stream. */
      claimBackoffMs: positiveInt.default(1500),
      /** How often (fleet-wide, once) slots of ended or vanished streams are freed. */
      reconcileMs: positiveInt.default(10_000),
    })
    .prefault({})
    .refine(
      (f) => f.fenceAfterMs < f.deadAfterMs,
      'fenceAfterMs must be below deadAfterMs: a replica stops ticking before the fleet takes its streams',
    ),
});

export const configSchema = z.strictObject({
  port: port.default(8080),
  host: z.string().default('0.0.0.0'),
  /** Base URL of the /v1beta + /billing upstream. Unset → `serve` starts the embedded emulator. */
  upstreamUrl: z.string().url().optional(),
  /** The gateway's own base URL as customers reach it: the migration guide's examples use it (unset: a placeholder). */
  publicUrl: z
    .string()
    .url()
    .refine((u) => /^https?:\/\//i.test(u), 'must be an http:// or https:// URL')
    .refine((u) => URL.canParse(u) && publicOnly(new URL(u)), 'must carry no credentials, query or fragment: customers read it')
    .optional(),
  logLevel: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  /** Log lines for a person (pino-pretty) or one JSON object each; unset: pretty only on a terminal outside production (src/lib/logger.ts `logFormat`). */
  logPretty: z.boolean().optional(),
  /** The provider's brand name: the `backend` value, the completion's cache field, the region header `X-<Name>-Region`. */
  brand: brandToken.default('svc'),
  /** The provider's abbreviation: API key prefix `<abbr>-` and reference scheme `<abbr>://` (default: the brand). */
  brandAbbreviation: brandToken.optional(),
  /** The other `inference.backend` value (a third-party model host), beside the brand's own. */
  thirdPartyBackend: brandToken.default('thirdparty'),
  /** Stands for the media-room vendor (source type, response field, end reason). */
  roomVendor: brandToken.default('room'),
  requestTimeoutMs: positiveInt.default(30_000),
  shutdownGraceMs: positiveInt.default(10_000),
  /** Circuit breaker of the upstream client (src/upstream/breaker.ts). threshold 0 disables it. */
  upstreamBreaker: z.strictObject({ threshold: z.number().int().min(0).default(5), openMs: positiveInt.default(5_000) }).prefault({}),
  /**
   * On SIGTERM, how long the gateway keeps serving with /readyz answering 503 before it drains, so
   * load balancers take it out of rotation first (5000 when NODE_ENV=production). Part of the grace period.
   */
  shutdownDelayMs: z.number().int().min(0).default(0),
  /** Production (NODE_ENV=production) with no upstreamUrl boots only when this asks for the embedded emulator. */
  embeddedEmulator: z.boolean().default(false),
  server: serverSchema.prefault({}),
  cors: corsSchema.prefault({}),
  legacy: legacySchema.prefault({}),
  emulator: emulatorSchema.prefault({}),
  deprecation: deprecationSchema.prefault({}),
  admin: adminSchema.prefault({}),
  telemetry: telemetrySchema.prefault({}),
  store: storeSchema.prefault({}),
});

export type Config = z.infer<typeof configSchema>;
export type EmulatorConfig = Config['emulator'];
export type LegacyConfig = Config['legacy'];
export type RelayConfig = LegacyConfig['relay'];
export type WebrtcConfig = LegacyConfig['webrtc'];
export type ModelConfig = EmulatorConfig['models'][number];
export type AccountConfig = EmulatorConfig['accounts'][number];
export type DeprecationConfig = Config['deprecation'];
export type BrownoutConfig = DeprecationConfig['brownouts'];
export type TelemetryConfig = Config['telemetry'];
export type ServerConfig = Config['server'];
export type CorsConfig = Config['cors'];
export type StoreConfig = Config['store'];
export type FleetConfig = StoreConfig['fleet'];

/** Environment variable → config path, and how to parse it. */
const ENV: Record<string, { path: string[]; type: 'string' | 'number' | 'boolean' | 'list' | 'file' }> = {
  PORT: { path: ['port'], type: 'number' },
  HOST: { path: ['host'], type: 'string' },
  UPSTREAM_URL: { path: ['upstreamUrl'], type: 'string' },
  PUBLIC_URL: { path: ['publicUrl'], type: 'string' },
  LOG_LEVEL: { path: ['logLevel'], type: 'string' },
  LOG_PRETTY: { path: ['logPretty'], type: 'boolean' },
  BRAND: { path: ['brand'], type: 'string' },
  BRAND_ABBREVIATION: { path: ['brandAbbreviation'], type: 'string' },
  THIRDPARTY_BACKEND: { path: ['thirdPartyBackend'], type: 'string' },
  ROOM_VENDOR: { path: ['roomVendor'], type: 'string' },
  SHUTDOWN_GRACE_MS: { path: ['shutdownGraceMs'], type: 'number' },
  SHUTDOWN_DELAY_MS: { path: ['shutdownDelayMs'], type: 'number' },
  EMULATOR_EMBEDDED: { path: ['embeddedEmulator'], type: 'boolean' },
  SERVER_HEADERS_TIMEOUT_MS: { path: ['server', 'headersTimeoutMs'], type: 'number' },
  SERVER_REQUEST_TIMEOUT_MS: { path: ['server', 'requestTimeoutMs'], type: 'number' },
  SERVER_KEEP_ALIVE_TIMEOUT_MS: { path: ['server', 'keepAliveTimeoutMs'], type: 'number' },
  SERVER_IDLE_TIMEOUT_MS: { path: ['server', 'idleTimeoutMs'], type: 'number' },
  DRAIN_TIMEOUT_MS: { path: ['server', 'drainTimeoutMs'], type: 'number' },
  TRUST_PROXY: { path: ['server', 'trustProxy'], type: 'string' },
  CORS_ORIGINS: { path: ['cors', 'origins'], type: 'list' },
  CORS_CREDENTIALS: { path: ['cors', 'credentials'], type: 'boolean' },
  EMULATOR_PORT: { path: ['emulator', 'port'], type: 'number' },
  EMULATOR_HOST: { path: ['emulator', 'host'], type: 'string' },
  EMULATOR_PUBLIC_URL: { path: ['emulator', 'publicUrl'], type: 'string' },
  EMULATOR_REGION: { path: ['emulator', 'region'], type: 'string' },
  EMULATOR_LEASE_TTL_SECONDS: { path: ['emulator', 'leaseTtlSeconds'], type: 'number' },
  EMULATOR_TOMBSTONE_SECONDS: { path: ['emulator', 'tombstoneSeconds'], type: 'number' },
  EMULATOR_FRAME_RETENTION_SECONDS: { path: ['emulator', 'frameRetentionSeconds'], type: 'number' },
  EMULATOR_TOKENS_PER_FRAME: { path: ['emulator', 'tokensPerFrame'], type: 'number' },
  EMULATOR_CONTROL_API: { path: ['emulator', 'controlApi'], type: 'boolean' },
  EMULATOR_AUTO_PUBLISH: { path: ['emulator', 'autoPublish', 'enabled'], type: 'boolean' },
  EMULATOR_AUTO_PUBLISH_FPS: { path: ['emulator', 'autoPublish', 'fps'], type: 'number' },
  EMULATOR_AUTO_PUBLISH_WIDTH: { path: ['emulator', 'autoPublish', 'width'], type: 'number' },
  EMULATOR_AUTO_PUBLISH_HEIGHT: { path: ['emulator', 'autoPublish', 'height'], type: 'number' },
  EMULATOR_DIALECT: { path: ['emulator', 'dialect'], type: 'string' },
  EMULATOR_IMAGE_FETCH_ALLOWED_HOSTS: { path: ['emulator', 'imageFetch', 'allowedHosts'], type: 'list' },
  EMULATOR_CAMERA_ALLOWED_HOSTS: { path: ['emulator', 'cameraSources', 'allowedHosts'], type: 'list' },
  EMULATOR_RATE_LIMIT_PER_SECOND: { path: ['emulator', 'rateLimit', 'completionsPerSecond'], type: 'number' },
  EMULATOR_REAP_IDLE_SECONDS: { path: ['emulator', 'reapIdleSeconds'], type: 'number' },
  EMULATOR_ROOM_WHIP: { path: ['emulator', 'room', 'whip', 'enabled'], type: 'boolean' },
  EMULATOR_MODEL_LATENCY_MEDIAN_MS: { path: ['emulator', 'modelLatency', 'medianMs'], type: 'number' },
  EMULATOR_MODEL_LATENCY_P99_MS: { path: ['emulator', 'modelLatency', 'p99Ms'], type: 'number' },
  EMULATOR_MODEL_LATENCY_PER_FRAME_MS: { path: ['emulator', 'modelLatency', 'perFrameMs'], type: 'number' },
  EMULATOR_MODEL_LATENCY_SEED: { path: ['emulator', 'modelLatencySeed'], type: 'number' },
  LEGACY_LEASE_TTL_SECONDS: { path: ['legacy', 'leaseTtlSeconds'], type: 'number' },
  LEGACY_MAX_STREAMS_PER_KEY: { path: ['legacy', 'maxStreamsPerKey'], type: 'number' },
  LEGACY_TOMBSTONE_SECONDS: { path: ['legacy', 'tombstoneSeconds'], type: 'number' },
  LEGACY_WEBRTC_MODE: { path: ['legacy', 'webrtc', 'mode'], type: 'string' },
  LEGACY_MAX_IN_FLIGHT: { path: ['legacy', 'maxInFlight'], type: 'number' },
  LEGACY_MEDIA_WORKER_RECYCLE_RSS_MB: { path: ['legacy', 'mediaWorker', 'recycleRssMb'], type: 'number' },
  DEPRECATION_DATE: { path: ['deprecation', 'date'], type: 'string' },
  DEPRECATION_SUNSET: { path: ['deprecation', 'sunset'], type: 'string' },
  DEPRECATION_LINK: { path: ['deprecation', 'link'], type: 'string' },
  DEPRECATION_AFTER_SUNSET: { path: ['deprecation', 'afterSunset'], type: 'string' },
  ADMIN_TOKEN: { path: ['admin', 'token'], type: 'string' },
  TELEMETRY_ROLLUP_CRON: { path: ['telemetry', 'rollupCron'], type: 'string' },
  TELEMETRY_ROLLUP_TIMEZONE: { path: ['telemetry', 'rollupTimezone'], type: 'string' },
  TELEMETRY_METRICS: { path: ['telemetry', 'metrics'], type: 'boolean' },
  METRICS_PORT: { path: ['telemetry', 'metricsPort'], type: 'number' },
  METRICS_TOKEN: { path: ['telemetry', 'metricsToken'], type: 'string' },
  TELEMETRY_REQUEST_LOG: { path: ['telemetry', 'requestLog'], type: 'boolean' },
  REDIS_URL: { path: ['store', 'redisUrl'], type: 'string' },
  GATEWAY_ID: { path: ['store', 'gatewayId'], type: 'string' },
  GATEWAY_SECRET: { path: ['store', 'secret'], type: 'string' },
  STORE_COMMIT_BATCH_MS: { path: ['store', 'commitBatchMs'], type: 'number' },
  /** The secret read from a file (a mounted secret), trailing newline dropped. */
  GATEWAY_SECRET_FILE: { path: ['store', 'secret'], type: 'file' },
};

/** Names of the configuration environment variables set in `env` (for the boot log; never their values). */
export function configEnvNames(env: NodeJS.ProcessEnv = process.env): string[] {
  return Object.keys(ENV).filter((name) => env[name] !== undefined && env[name] !== '');
}

/** Every configuration environment variable and the config key it sets (`emulator.port`), for the CLI's help. */
export function configEnvVars(): { name: string; key: string }[] {
  return Object.entries(ENV).map(([name, spec]) => ({ name, key: spec.path.join('.') }));
}

/** How a person changes a config key, for messages: `PORT (or "port" in the config file)`. */
export function settingOf(key: string): string {
  const env = configEnvVars().find((v) => v.key === key);
  return env ? `${env.name} (or "${key}" in the config file)` : `"${key}" in the config file`;
}

export class ConfigError extends Error {
  override name = 'ConfigError';
}

type Json = Record<string, unknown>;

function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Deep merge of plain objects; arrays and scalars from `over` replace. */
export function mergeDeep(base: Json, over: Json): Json {
  const out: Json = { ...base };
  for (const [k, v] of Object.entries(over)) {
    out[k] = isObject(v) && isObject(out[k]) ? mergeDeep(out[k] as Json, v) : v;
  }
  return out;
}

function readJson(file: string): Json {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    throw new ConfigError(`cannot read config file ${file}: ${(err as Error).message}`);
  }
  try {
    const parsed: unknown = JSON.parse(text);
    if (!isObject(parsed)) throw new Error('top level must be an object');
    return parsed;
  } catch (err) {
    throw new ConfigError(`config file ${file} is not valid JSON: ${(err as Error).message}`);
  }
}

function envLayer(env: NodeJS.ProcessEnv): Json {
  const out: Json = {};
  if (env.GATEWAY_SECRET && env.GATEWAY_SECRET_FILE) throw new ConfigError('set GATEWAY_SECRET or GATEWAY_SECRET_FILE, not both');
  for (const [name, spec] of Object.entries(ENV)) {
    const raw = env[name];
    if (raw === undefined || raw === '') continue;
    let value: unknown = raw;
    if (spec.type === 'number') {
      value = Number(raw);
      if (!Number.isFinite(value)) throw new ConfigError(`${name}: expected a number, got ${JSON.stringify(raw)}`);
    } else if (spec.type === 'boolean') {
      if (!/^(1|0|true|false|yes|no)$/i.test(raw)) {
        throw new ConfigError(`${name}: expected true or false, got ${JSON.stringify(raw)}`);
      }
      value = /^(1|true|yes)$/i.test(raw);
    } else if (spec.type === 'file') {
      try {
        value = fs.readFileSync(raw, 'utf8').replace(/\r?\n$/, '');
      } catch (err) {
        throw new ConfigError(`${name}: cannot read ${raw}: ${(err as Error).message}`);
      }
    } else if (spec.type === 'list') {
      value = raw
        .split(',')
        .map((v) => v.trim())
        .filter(Boolean);
    }
    let node = out;
    spec.path.slice(0, -1).forEach((key) => {
      node[key] = isObject(node[key]) ? node[key] : {};
      node = node[key] as Json;
    });
    node[spec.path[spec.path.length - 1]!] = value;
  }
  return out;
}

/**
 * Expands `{abbr}` (the key prefix's token: the abbreviation, else the brand) and `{brand}` in key
 * strings so the shipped dev keys follow the configured brand (`ovs-local-dev` under the provider's profile).
 */
function expandBrand(cfg: Config): Config {
  const abbreviation = cfg.brandAbbreviation ?? cfg.brand;
  const accounts = cfg.emulator.accounts.map((a) => ({
    ...a,
    keys: a.keys.map((k) => ({ ...k, key: k.key.replaceAll('{abbr}', abbreviation).replaceAll('{brand}', cfg.brand) })),
  }));
  return { ...cfg, emulator: { ...cfg.emulator, accounts } };
}

/**
 * config/default.json of the repository or image: one level above this module in `src/` and
 * `dist/`, two above it in `dist-bench/src/` (the benches' build).
 */
export const DEFAULT_CONFIG_FILE =
  [path.resolve(__dirname, '..', 'config', 'default.json'), path.resolve(__dirname, '..', '..', 'config', 'default.json')].find((f) =>
    fs.existsSync(f),
  ) ?? path.resolve(__dirname, '..', 'config', 'default.json');

export interface LoadOptions {
  /** An extra JSON file layered over config/default.json. */
  file?: string;
  env?: NodeJS.ProcessEnv;
  /** Programmatic overrides, applied last (tests). */
  overrides?: Json;
  /** Skip config/default.json (tests that want bare schema defaults). */
  skipDefaultFile?: boolean;
}

/** Defaults that differ in production (NODE_ENV=production), below every other layer. */
const PRODUCTION_DEFAULTS: Json = { shutdownDelayMs: 5000 };

export function loadConfig(opts: LoadOptions = {}): Config {
  const env = opts.env ?? process.env;
  let layered: Json = env.NODE_ENV === 'production' ? { ...PRODUCTION_DEFAULTS } : {};
  if (!opts.skipDefaultFile && fs.existsSync(DEFAULT_CONFIG_FILE)) layered = mergeDeep(layered, readJson(DEFAULT_CONFIG_FILE));
  if (opts.file) layered = mergeDeep(layered, readJson(opts.file));
  layered = mergeDeep(layered, envLayer(env));
  if (opts.overrides) layered = mergeDeep(layered, opts.overrides);
  const result = configSchema.safeParse(layered);
  if (!result.success) {
    const lines = result.error.issues.map((i) => `  ${i.path.join('.') || '(root)'}: ${i.message}`);
    throw new ConfigError(`invalid configuration:\n${lines.join('\n')}`);
  }
  return expandBrand(result.data);
}

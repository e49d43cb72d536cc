/**
 * Configuration: one zod schema, resolved once at boot.
 * Precedence (later wins): schema defaults → config/default.json → --config FILE → environment.
 * Every key is documented in docs/configuration.md; a bad value fails at boot naming the key.
 */
import fs from 'node:fs';
import path from 'node:path';
import { validate as validCron } from 'node-cron';
import { z } from 'zod';

const port = z.number().int().min(0).max(65535);
const positive = z.number().positive();
const positiveInt = z.number().int().positive();
const brandToken = z.string().regex(/^[a-z][a-z0-9]*$/, 'lowercase letters and digits, starting with a letter');

const pricingSchema = z.strictObject({
  input_microcents_per_token: z.number().int().min(0),
  output_microcents_per_token: z.number().int().min(0),
  cached_input_microcents_per_token: z.number().int().min(0),
  version: z.string().default('2025-01-01'),
  public: z.boolean().default(true),
});

const modelSchema = z.strictObject({
  /** `provider/model-name`. */
  id: z.string().regex(/^[^/\s]+\/\S+$/, 'must look like provider/model-name'),
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
  pricing: pricingSchema,
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
  controlApi: z.boolean().default(false),
  autoPublish: z
    .strictObject({
      enabled: z.boolean().default(false),
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
    })
    .prefault({}),
  accounts: z.array(accountSchema).default([]),
  models: z.array(modelSchema).default([]),
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
  /** ICE servers of the gateway's own peer connections (host candidates only when empty). */
  iceServers: z
    .array(z.strictObject({ urls: z.union([z.string(), z.array(z.string())]), username: z.string().optional(), credential: z.string().optional() }))
    .default([]),
});

const legacySchema = z.strictObject({
  leaseTtlSeconds: positiveInt.default(45),
  maxStreamsPerKey: positiveInt.default(5),
  maxTokensPerSecond: positive.default(128),
  tombstoneSeconds: z.number().min(0).default(300),
  /** Inferences in flight per stream; a tick that finds this many running is skipped. */
  maxInFlight: positiveInt.default(1),
  /** Models tried, in order, after the requested one fails with 503 or a network error. */
  fallbackModels: z.array(z.string()).default([]),
  /** How often the gateway renews the upstream lease (must be well inside its 300 s). */
  upstreamKeepaliveSeconds: positive.default(60),
  /** How often the scheduler polls the upstream stream for its first frame. */
  firstFramePollMs: positiveInt.default(250),
  wsAuthTimeoutMs: positiveInt.default(10_000),
  wsHeartbeatMs: positiveInt.default(30_000),
  wsMaxPayloadBytes: positiveInt.default(16 * 1024),
  /** Bytes buffered for one slow socket before its messages are shed. */
  wsMaxBufferedBytes: positiveInt.default(1024 * 1024),
  modelsCacheMs: z.number().int().min(0).default(5000),
  turnServers: z
    .array(z.strictObject({ urls: z.string(), username: z.string(), credential: z.string() }))
    .default([]),
  /** The gateway's media relay (webrtc and customer-room sources → the upstream room); see src/gateway/ingest/README.md. */
  relay: relaySchema.prefault({}),
  /** Feedback one tenant may keep (entries are at most 4 KiB of text) and the list endpoint's page size. */
  feedback: z
    .strictObject({
      perStream: positiveInt.default(50),
      perAccount: positiveInt.default(1000),
      pageSize: positiveInt.default(100),
      maxPageSize: positiveInt.default(1000),
    })
    .prefault({}),
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

/** What every /v0.2 response (and results-socket upgrade) announces: RFC 9745, RFC 8594, RFC 8288. */
const deprecationSchema = z
  .strictObject({
    /** When /v0.2 was deprecated: `Deprecation: @<unix seconds>`. */
    date: instant.default('2026-01-01T00:00:00Z'),
    /** When /v0.2 stops: `Sunset: <IMF-fixdate>`; not earlier than `date`. */
    sunset: instant.default('2026-12-31T00:00:00Z'),
    /** Migration guide: `Link: <link>; rel="deprecation"`. The default is the guide this gateway serves. */
    link: z.string().min(1).default('/docs/migration'),
  })
  .refine((d) => Date.parse(d.sunset) >= Date.parse(d.date), { message: 'must not be earlier than deprecation.date', path: ['sunset'] });

const adminSchema = z.strictObject({
  /** Bearer token of the /admin endpoints; unset → they answer 404. */
  token: z.string().min(16, 'use at least 16 characters').optional(),
});

const telemetrySchema = z.strictObject({
  /** When the deprecation counters are rolled up and a summary is logged (node-cron syntax). */
  rollupCron: z.string().refine((e) => validCron(e), 'not a valid cron expression').default('5 0 * * *'),
  rollupTimezone: timezone.default('UTC'),
  /** Serve Prometheus metrics at /metrics. */
  metrics: z.boolean().default(true),
  /** One access-log line per HTTP request (pino-http). */
  requestLog: z.boolean().default(true),
});

export const configSchema = z.strictObject({
  port: port.default(8080),
  host: z.string().default('0.0.0.0'),
  /** Base URL of the /v1beta + /billing upstream. Unset → `serve` starts the embedded emulator. */
  upstreamUrl: z.string().url().optional(),
  logLevel: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  /** Stands for the provider's brand wherever the interface carries it (scheme, key prefix, header, field). */
  brand: brandToken.default('svc'),
  /** Stands for the media-room vendor (source type, response field, end reason). */
  roomVendor: brandToken.default('room'),
  requestTimeoutMs: positiveInt.default(30_000),
  shutdownGraceMs: positiveInt.default(10_000),
  legacy: legacySchema.prefault({}),
  emulator: emulatorSchema.prefault({}),
  deprecation: deprecationSchema.prefault({}),
  admin: adminSchema.prefault({}),
  telemetry: telemetrySchema.prefault({}),
});

export type Config = z.infer<typeof configSchema>;
export type EmulatorConfig = Config['emulator'];
export type LegacyConfig = Config['legacy'];
export type RelayConfig = LegacyConfig['relay'];
export type ModelConfig = EmulatorConfig['models'][number];
export type AccountConfig = EmulatorConfig['accounts'][number];
export type DeprecationConfig = Config['deprecation'];
export type TelemetryConfig = Config['telemetry'];

/** Environment variable → config path, and how to parse it. */
const ENV: Record<string, { path: string[]; type: 'string' | 'number' | 'boolean' }> = {
  PORT: { path: ['port'], type: 'number' },
  HOST: { path: ['host'], type: 'string' },
  UPSTREAM_URL: { path: ['upstreamUrl'], type: 'string' },
  LOG_LEVEL: { path: ['logLevel'], type: 'string' },
  BRAND: { path: ['brand'], type: 'string' },
  ROOM_VENDOR: { path: ['roomVendor'], type: 'string' },
  SHUTDOWN_GRACE_MS: { path: ['shutdownGraceMs'], type: 'number' },
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
  LEGACY_LEASE_TTL_SECONDS: { path: ['legacy', 'leaseTtlSeconds'], type: 'number' },
  LEGACY_MAX_STREAMS_PER_KEY: { path: ['legacy', 'maxStreamsPerKey'], type: 'number' },
  LEGACY_TOMBSTONE_SECONDS: { path: ['legacy', 'tombstoneSeconds'], type: 'number' },
  DEPRECATION_DATE: { path: ['deprecation', 'date'], type: 'string' },
  DEPRECATION_SUNSET: { path: ['deprecation', 'sunset'], type: 'string' },
  DEPRECATION_LINK: { path: ['deprecation', 'link'], type: 'string' },
  ADMIN_TOKEN: { path: ['admin', 'token'], type: 'string' },
  TELEMETRY_ROLLUP_CRON: { path: ['telemetry', 'rollupCron'], type: 'string' },
  TELEMETRY_ROLLUP_TIMEZONE: { path: ['telemetry', 'rollupTimezone'], type: 'string' },
  TELEMETRY_METRICS: { path: ['telemetry', 'metrics'], type: 'boolean' },
  TELEMETRY_REQUEST_LOG: { path: ['telemetry', 'requestLog'], type: 'boolean' },
};

/** Names of the configuration environment variables set in `env` (for the boot log; never their values). */
export function configEnvNames(env: NodeJS.ProcessEnv = process.env): string[] {
  return Object.keys(ENV).filter((name) => env[name] !== undefined && env[name] !== '');
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

/** Expands `{brand}` in key strings so the shipped dev keys follow the configured brand. */
function expandBrand(cfg: Config): Config {
  const accounts = cfg.emulator.accounts.map((a) => ({
    ...a,
    keys: a.keys.map((k) => ({ ...k, key: k.key.replaceAll('{brand}', cfg.brand) })),
  }));
  return { ...cfg, emulator: { ...cfg.emulator, accounts } };
}

export const DEFAULT_CONFIG_FILE = path.resolve(__dirname, '..', 'config', 'default.json');

export interface LoadOptions {
  /** An extra JSON file layered over config/default.json. */
  file?: string;
  env?: NodeJS.ProcessEnv;
  /** Programmatic overrides, applied last (tests). */
  overrides?: Json;
  /** Skip config/default.json (tests that want bare schema defaults). */
  skipDefaultFile?: boolean;
}

export function loadConfig(opts: LoadOptions = {}): Config {
  let layered: Json = {};
  if (!opts.skipDefaultFile && fs.existsSync(DEFAULT_CONFIG_FILE)) layered = mergeDeep(layered, readJson(DEFAULT_CONFIG_FILE));
  if (opts.file) layered = mergeDeep(layered, readJson(opts.file));
  layered = mergeDeep(layered, envLayer(opts.env ?? process.env));
  if (opts.overrides) layered = mergeDeep(layered, opts.overrides);
  const result = configSchema.safeParse(layered);
  if (!result.success) {
    const lines = result.error.issues.map((i) => `  ${i.path.join('.') || '(root)'}: ${i.message}`);
    throw new ConfigError(`invalid configuration:\n${lines.join('\n')}`);
  }
  return expandBrand(result.data);
}

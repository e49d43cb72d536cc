/**
 * Chaos on real processes (fleet.ts: the emulator, three replica CLIs, and either one redis-server
 * with AOF or a Sentinel set): a seeded random sequence of faults (SIGKILL a replica and start a
 * replacement, SIGTERM one and start a replacement, SIGSTOP one for a while, restart Redis with its
 * AOF, pause Redis, fail Redis over through Sentinel, cut one replica from Redis or the upstream,
 * slow them down) while native frame-mode streams run over several accounts (5 per key), each with
 * a results socket that reconnects as the Python SDK does and keepalives as the Python SDK sends
 * them, every call routed as a balancer checking /readyz would. Then it checks the invariants: no
 * stream ended unless asked, no result delivered twice, every stream delivered again within the
 * bound after each fault, the 5-stream limit exact afterwards, and nothing left behind (slots,
 * upstream streams) once every stream is deleted.
 * Shared by test/gateway/fleet/chaos.test.ts (short runs) and `npm run bench -- chaos`.
 */
import { loadConfig } from '../../src/config';
import type { FleetConfig } from '../../src/config';
import { keyHash } from '../../src/lib/keys';
import { prng } from './prng';
import { createStream, startFleet } from './fleet';
import type { Fleet, Replica } from './fleet';
import { connectResults } from './results-socket';
import type { ResultsSocket } from './results-socket';
import { proxyInFront } from './fault-proxy';
import type { FaultProxy } from './fault-proxy';
import { deadline, sleep } from './time';
import { quantile, rssKbOf } from './util';

export type FaultKind = 'kill' | 'term' | 'stop' | 'redis-restart' | 'redis-pause' | 'redis-cut' | 'upstream-cut' | 'latency' | 'failover';
/**
 * Process faults, Redis faults, and network faults through a fault proxy per replica and
 * dependency: one replica's Redis packets dropped (`redis-cut`), one replica's upstream cut
 * (`upstream-cut`), and every replica's Redis and upstream slowed (`latency`).
 */
export const FAULT_KINDS: readonly FaultKind[] = [
  'kill',
  'term',
  'stop',
  'redis-restart',
  'redis-pause',
  'redis-cut',
  'upstream-cut',
  'latency',
];

/**
 * On a Sentinel set: the replica faults, the primary SIGKILLed and the old primary back as a replica
 * (`failover`), one replica cut from the upstream, and the upstream slowed for every replica. The
 * replicas learn the primary's address from the sentinels and connect to it directly, so no
 * per-replica proxy sits on their Redis path: the Redis cut and Redis latency run on plain Redis.
 */
export const SENTINEL_FAULT_KINDS: readonly FaultKind[] = ['kill', 'term', 'stop', 'failover', 'upstream-cut', 'latency'];

export interface ChaosOptions {
  /** The CLI entry (a test's esbuild bundle, or dist/main.js). */
  main: string;
  /** The brand prefix of API keys (`svc`): the run's keys are `<brand>-chaos-<n>`. */
  brand: string;
  seed: number;
  /** How long faults are injected (the streams run a little longer: setup and settling). */
  durationMs: number;
  /** Time between the starts of two faults. */
  faultEveryMs: number;
  /** Streams in all, `perKey` per API key (one account per key). */
  streams: number;
  perKey?: number;
  intervalSeconds?: number;
  /** Each stream's keepalive period (the Python SDK: ttl / 2; the bench's default: 10 s). */
  keepaliveEveryMs?: number;
  /** How long a SIGSTOPped replica stays paused, and a paused Redis. */
  replicaPauseMs?: number;
  redisPauseMs?: number;
  /** How long a network fault (cut, latency) lasts. */
  networkFaultMs?: number;
  /** Plain Redis (default) or a Sentinel set (its faults: `SENTINEL_FAULT_KINDS`). */
  store?: 'redis' | 'sentinel';
  /** Default: every kind the store allows (`FAULT_KINDS` or `SENTINEL_FAULT_KINDS`). */
  faults?: readonly FaultKind[];
  /** Added to every gap bound in the pass/fail check (a loaded CI box); the report shows raw gaps. */
  slackMs?: number;
  /** Progress lines (default: none). */
  log?: (line: string) => void;
  /** Also log every replica line at warn or above as it comes (default: only their tally in the report). */
  verbose?: boolean;
}

export interface FaultRecord {
  kind: FaultKind;
  /** The replica signalled (replica faults), and its replacement (kill, term). */
  target?: string;
  replacement?: string;
  atMs: number;
  doneMs: number;
  /** The bound the streams must deliver again within after this fault (before slack). */
  boundMs: number;
  /** Per stream: last result before the fault → first after it (ms; Infinity: none after). */
  gapsMs: number[];
}

export interface Invariant {
  name: string;
  ok: boolean;
  detail: string;
}

export interface ChaosReport {
  seed: number;
  store: 'redis' | 'sentinel';
  streams: number;
  faults: FaultRecord[];
  results: number;
  /** Every gap between consecutive results of one stream (ms). */
  gapsMs: number[];
  /** The failover bound docs/scaling.md states: deadAfterMs + sweepMs + claimBackoffMs + one interval. */
  failoverBoundMs: number;
  reconnects: number;
  keepalives: { sent: number; failed: number };
  duplicates: number;
  /** Streams that ended before the run deleted them: how the client saw it, and the store's reason. */
  ended: { streamId: string; close?: string; storeReason?: string }[];
  /** `legacy stream ended` lines of the replicas before the deletes (replica, stream, reason). */
  endedLines: { replica: string; streamId: string; reason: string }[];
  /** Slots per key after the faults (expected: perKey) and the status of a sixth create. */
  slotsAfter: number[];
  sixthCreate: number[];
  leftovers: { slots: number; upstreamStreams: number };
  fleetEvents: Record<string, number>;
  /** Replica lines at warn or above, by message: where to look when an invariant fails. */
  warnings: Record<string, number>;
  /** The emulator's resident memory (MiB) before the faults, its largest after any fault, and at the end. */
  emulatorRssMiB: { start: number; max: number; end: number };
  invariants: Invariant[];
  ok: boolean;
}

/** How long the test Sentinel set takes to promote a replica (docs/scaling.md: ≈ 2.2 s measured), with margin. */
const SENTINEL_PROMOTION_MS = 3000;

/** The Python SDK's results-socket reconnect waits (then it gives up); the count resets on a message. */
const RECONNECT_DELAYS_MS = [1000, 2000, 4000, 8000, 10_000];
/** The Python SDK's keepalive: 3 retries, 2 s apart. */
const KEEPALIVE_RETRIES = 3;
const KEEPALIVE_RETRY_MS = 2000;
/** The longest one fault may take to inject and undo (a Sentinel failover waits up to 30 s for a promotion and 30 s for the rejoin). */
const FAULT_DEADLINE_MS = 90_000;

/** One customer stream: its results socket (reconnecting like the Python SDK) and its keepalives. */
class ChaosClient {
  readonly arrivals: number[] = [];
  readonly seen = new Set<string>();
  duplicates = 0;
  reconnects = 0;
  /** A close the SDK treats as fatal (1008, 1001 with a reason) or giving up: the stream is over for the customer. */
  fatal: { code: number; reason: string; atMs: number } | undefined;
  keepalivesSent = 0;
  keepalivesFailed = 0;
  /** The last answer of each keepalive that failed after its retries (0: no answer) and the replica that gave it. */
  readonly keepaliveFailures: { status: number; replica: string }[] = [];
  private sock: ResultsSocket | undefined;
  private tries = 0;
  /** Keepalives stopped (the run is deleting its streams). */
  private stopped = false;
  /** The run is over: a close is not acted on. */
  private closed = false;
  private timers = new Set<NodeJS.Timeout>();
  private closedWaiters: (() => void)[] = [];

  constructor(
    readonly streamId: string,
    readonly key: string,
    private readonly pick: () => { id: string; url: string },
    private readonly onKeepaliveFailed: (failure: { status: number; replica: string }) => void = () => undefined,
  ) {}

  private pickUrl(): string {
    return this.pick().url;
  }

  start(keepaliveEveryMs: number, firstKeepaliveMs: number): void {
    this.connect();
    const next = (ms: number) =>
      this.later(() => {
        if (!this.stopped) void this.keepalive().finally(() => this.stopped || next(keepaliveEveryMs));
      }, ms);
    next(firstKeepaliveMs);
  }

  private later(fn: () => void, ms: number): void {
    const t = setTimeout(() => {
      this.timers.delete(t);
      if (!this.closed) fn();
    }, ms);
    t.unref();
    this.timers.add(t);
  }

  private connect(): void {
    const sock = connectResults(this.pickUrl(), this.streamId, this.key, {
      onMessage: ({ id, atMs }) => {
        this.tries = 0;
        if (this.seen.has(id)) this.duplicates++;
        else {
          this.seen.add(id);
          this.arrivals.push(atMs);
        }
      },
    });
    this.sock = sock;
    void sock.closed.then(({ code, reason }) => {
      if (this.sock === sock) this.sock = undefined;
      if (this.closed || this.fatal) return this.wakeClosed();
      if (code === 1008 || (code === 1001 && reason)) {
        this.fatal = { code, reason, atMs: Date.now() };
        return this.wakeClosed();
      }
      if (this.tries >= RECONNECT_DELAYS_MS.length) {
        this.fatal = { code, reason: `gave up reconnecting (last close ${code} ${reason})`, atMs: Date.now() };
        return this.wakeClosed();
      }
      const delay = RECONNECT_DELAYS_MS[this.tries++]!;
      this.reconnects++;
      this.later(() => this.connect(), delay);
    });
  }

  private wakeClosed(): void {
    for (const w of this.closedWaiters.splice(0)) w();
  }

  private async keepalive(): Promise<void> {
    this.keepalivesSent++;
    let status = 0;
    let replica = '';
    for (let attempt = 0; attempt <= KEEPALIVE_RETRIES && !this.stopped; attempt++) {
      if (attempt > 0) await sleep(KEEPALIVE_RETRY_MS);
      const to = this.pick();
      replica = to.id;
      status = await fetch(`${to.url}/v0.2/streams/${this.streamId}/keepalive`, {
        method: 'POST',
        headers: { authorization: `Bearer ${this.key}` },
        signal: AbortSignal.timeout(10_000),
      }).then(
        async (r) => (await r.arrayBuffer(), r.status),
        () => 0,
      );
      if (status === 200) return;
    }
    if (this.stopped) return;
    this.keepalivesFailed++;
    this.keepaliveFailures.push({ status, replica });
    this.onKeepaliveFailed({ status, replica });
  }

  /** Resolves once the socket closed for good (a fatal close), or after `ms`. */
  closedWithin(ms: number): Promise<void> {
    if (this.fatal) return Promise.resolve();
    return new Promise((resolve) => {
      const t = setTimeout(resolve, ms).unref();
      this.closedWaiters.push(() => {
        clearTimeout(t);
        resolve();
      });
    });
  }

  /** Keepalives stop; the socket (and its reconnects) stay until the stream's end closes it. */
  stopKeepalives(): void {
    this.stopped = true;
  }

  close(): void {
    this.stopped = true;
    this.closed = true;
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    this.sock?.ws.terminate();
  }

  /** Last arrival at or before `t`, first after it. */
  gapAcross(t: number): number {
    let before: number | undefined;
    for (const a of this.arrivals) {
      if (a <= t) before = a;
      else return before === undefined ? Infinity : a - before;
    }
    return Infinity;
  }
}

/** How often the balancer model asks each replica's /readyz, and how long it waits for the answer. */
const READY_CHECK_MS = 500;
const READY_TIMEOUT_MS = 400;

/**
 * The replicas a load balancer would send a call to now: running, not paused, not draining, and
 * answering /readyz 200 at its last check (`fall 1 rise 1`). When none is ready, every running
 * replica is picked (a balancer would answer 503 itself; the clients retry either way).
 */
class Routing {
  private readonly serving = new Set<Replica>();
  private readonly unready = new Set<Replica>();
  private readonly checks: ReturnType<typeof setInterval>;

  constructor(private readonly rand: () => number) {
    this.checks = setInterval(() => void this.checkReadiness(), READY_CHECK_MS);
  }

  add(r: Replica): void {
    this.serving.add(r);
  }

  remove(r: Replica): void {
    this.serving.delete(r);
    this.unready.delete(r);
  }

  /** Every running replica, ready or not (what faults pick from). */
  list(): Replica[] {
    return [...this.serving];
  }

  pick(): Replica {
    const ready = this.list().filter((r) => !this.unready.has(r));
    const list = ready.length > 0 ? ready : this.list();
    if (list.length === 0) throw new Error('no replica serving');
    return list[Math.floor(this.rand() * list.length)]!;
  }

  stop(): void {
    clearInterval(this.checks);
  }

  private async checkReadiness(): Promise<void> {
    await Promise.all(
      this.list().map(async (r) => {
        const ok = await fetch(`${r.url}/readyz`, { signal: AbortSignal.timeout(READY_TIMEOUT_MS) })
          .then((res) => res.status === 200)
          .catch(() => false);
        if (!this.serving.has(r)) return;
        if (ok) this.unready.delete(r);
        else this.unready.add(r);
      }),
    );
  }
}

/** A legacy create, retried while the fleet sheds it (503 during a Redis fault). */
async function createRetrying(routing: Routing, key: string, body: unknown): Promise<{ status: number; id?: string }> {
  for (let attempt = 0; ; attempt++) {
    const c = await createStream(routing.pick().url, key, body).catch(() => ({ status: 0, id: undefined }));
    if (c.id || (c.status !== 0 && c.status < 500) || attempt >= 10) return c;
    await sleep(500);
  }
}

export async function runChaos(opts: ChaosOptions): Promise<ChaosReport> {
  const log = opts.log ?? (() => undefined);
  const perKey = opts.perKey ?? 5;
  const intervalMs = (opts.intervalSeconds ?? 1) * 1000;
  const replicaPauseMs = opts.replicaPauseMs ?? 6000;
  const redisPauseMs = opts.redisPauseMs ?? 3000;
  const networkFaultMs = opts.networkFaultMs ?? 5000;
  const store = opts.store ?? 'redis';
  const kinds = opts.faults ?? (store === 'sentinel' ? SENTINEL_FAULT_KINDS : FAULT_KINDS);
  const refused = kinds.filter((k) => store === 'sentinel' && !SENTINEL_FAULT_KINDS.includes(k));
  if (refused.length || (store === 'redis' && kinds.includes('failover')))
    throw new Error(`faults ${[...refused, ...(store === 'redis' ? ['failover'] : [])].join(', ')} do not run on ${store}`);
  const slackMs = opts.slackMs ?? 0;
  const fleetCfg: FleetConfig = loadConfig({ env: {} }).store.fleet;
  // docs/scaling.md, failure modes: gap ≤ deadAfterMs + sweep + claim + one interval.
  const failoverBoundMs = fleetCfg.deadAfterMs + fleetCfg.sweepMs + fleetCfg.claimBackoffMs + intervalMs;
  // A paused replica or Redis delivers nothing while paused: its sockets wait out the pause itself.
  // A failover is an outage of the sentinels' promotion (down-after 1 s, then the election:
  // docs/scaling.md measured ≈ 2.2 s) during which every replica's heartbeat ages: past it the
  // replicas may take each other's streams over, within the failover bound again.
  const boundOf = (kind: FaultKind) =>
    kind === 'failover'
      ? SENTINEL_PROMOTION_MS + failoverBoundMs
      : kind === 'stop'
        ? Math.max(failoverBoundMs, replicaPauseMs + intervalMs)
        : kind === 'redis-pause'
          ? Math.max(failoverBoundMs, redisPauseMs + intervalMs)
          : kind === 'redis-cut' || kind === 'latency'
            ? // A socket on the cut (or slowed) replica hears nothing until it heals; then within a second.
              Math.max(failoverBoundMs, networkFaultMs + intervalMs + 1000)
            : failoverBoundMs;

  // Faults and their targets from one seeded stream; clients' routing from another, so a seed
  // replays the same fault sequence however many calls the clients made meanwhile.
  const rand = prng(opts.seed);
  const routeRand = prng(opts.seed ^ 0x9e3779b9);
  const keyCount = Math.ceil(opts.streams / perKey);
  const keys = Array.from({ length: keyCount }, (_, i) => `${opts.brand}-chaos-${i + 1}`);
  const accounts = keys.map((_, i) => ({
    id: `0f5b8a8e-3d2c-4a47-9a61-6f1f2b9c${(0xc000 + i).toString(16)}`,
    name: `Chaos account ${i + 1}`,
    balance_microcents: 1_000_000_000_000,
    keys: [{ key: `{brand}-chaos-${i + 1}` }],
  }));
  const defaultAccounts = (loadConfig({ env: {} }).emulator.accounts as unknown[]).slice();
  const endedLines: ChaosReport['endedLines'] = [];
  const fleetEvents: Record<string, number> = {};
  const warnings: Record<string, number> = {};
  const counted = [
    'legacy stream ended',
    'legacy stream adopted',
    'legacy stream handed over',
    'claimed a stream of a dead replica',
    'tick refused by the store',
    'store had lost the stream',
  ];
  let cleaning = false;
  // Each replica (replacements too) reaches the upstream, and plain Redis, through proxies of its own.
  const proxies = new Map<string, { redis?: FaultProxy; upstream: FaultProxy }>();
  const fleet: Fleet = await startFleet({
    main: opts.main,
    store,
    replicaEnv: async (id, { redisUrl, upstreamUrl }): Promise<Record<string, string>> => {
      const upstream = await proxyInFront(upstreamUrl);
      const redis = store === 'redis' ? await proxyInFront(redisUrl!) : undefined;
      proxies.set(id, { redis: redis?.proxy, upstream: upstream.proxy });
      return { REDIS_URL: redis?.url ?? redisUrl!, UPSTREAM_URL: upstream.url };
    },
    keepLines: false,
    // Ticks ask for the latest frame once a second: 2 fps is plenty. At the harness's default
    // 10 fps, 40 streams kept the emulator at ≈ 80 % of a core encoding frames, and its 10-minute
    // frame buffers grew it past 4 GiB (a 2-core machine then starves the replicas it tests).
    publisher: { fps: 2, width: 160, height: 120 },
    logLevel: 'info',
    redisArgs: ['--appendonly', 'yes', '--appendfsync', 'everysec'],
    emulatorConfig: { emulator: { accounts: [...defaultAccounts, ...accounts] } },
    onLine: (replica, l) => {
      const msg = String(l.msg);
      const event = counted.find((c) => msg.startsWith(c));
      if (event) fleetEvents[event] = (fleetEvents[event] ?? 0) + 1;
      if (Number(l.level) >= 40 && !cleaning) {
        warnings[msg] = (warnings[msg] ?? 0) + 1;
        if (opts.verbose) log(`    ${new Date().toISOString().slice(11, 23)} ${replica} ${JSON.stringify(l)}`);
      }
      if (msg === 'legacy stream ended' && !cleaning) endedLines.push({ replica, streamId: String(l.streamId), reason: String(l.reason) });
    },
  });
  const clients: ChaosClient[] = [];
  const faults: FaultRecord[] = [];
  const invariants: Invariant[] = [];
  const check = (name: string, ok: boolean, detail: string) => invariants.push({ name, ok, detail });
  const routing = new Routing(routeRand);
  try {
    // When the fault phase starts (the creates before it count from the run's start).
    let phaseStart = Date.now();
    for (const r of fleet.replicas) routing.add(r);
    const body = {
      mode: 'frame',
      processing: { interval_seconds: intervalMs / 1000 },
      inference: { prompt: 'Describe the frame', model: 'local/analyzer-mini', max_output_tokens: 16 },
    };

    for (let i = 0; i < opts.streams; i++) {
      const key = keys[Math.floor(i / perKey)]!;
      const c = await createRetrying(routing, key, body);
      if (!c.id) throw new Error(`create ${i + 1} answered ${c.status}`);
      const client = new ChaosClient(
        c.id,
        key,
        () => routing.pick(),
        ({ status, replica }) =>
          log(
            `  keepalive of ${c.id} failed after the retries at +${((Date.now() - phaseStart) / 1000).toFixed(1)} s: last answer ${status || 'none'} from ${replica}`,
          ),
      );
      clients.push(client);
      client.start(opts.keepaliveEveryMs ?? 10_000, Math.floor(routeRand() * (opts.keepaliveEveryMs ?? 10_000)));
    }
    log(
      `chaos: ${opts.streams} streams over ${keyCount} keys, seed ${opts.seed}, a fault every ${opts.faultEveryMs / 1000} s for ${opts.durationMs / 1000} s`,
    );
    for (const until = Date.now() + 30_000; clients.some((c) => c.arrivals.length < 2) && Date.now() < until;) await sleep(200);

    // ── Faults ──
    let generation = 0;
    const nextId = () => `R${++generation}`;
    const exits: Promise<unknown>[] = [];
    let bag: FaultKind[] = [];
    const nextKind = () => {
      // Shuffle-bag: every kind once per round, in a seeded order (a short run still sees each).
      if (bag.length === 0) {
        bag = [...kinds];
        for (let i = bag.length - 1; i > 0; i--) {
          const j = Math.floor(rand() * (i + 1));
          [bag[i], bag[j]] = [bag[j]!, bag[i]!];
        }
      }
      return bag.pop()!;
    };
    phaseStart = Date.now();
    const emulatorRss = () => Math.round(rssKbOf(fleet.emulator.child.pid) / 1024);
    const rss = { start: emulatorRss(), max: 0, end: 0 };
    for (let n = 1; phaseStart + n * opts.faultEveryMs <= phaseStart + opts.durationMs; n++) {
      await sleep(phaseStart + n * opts.faultEveryMs - Date.now());
      const kind = nextKind();
      const atMs = Date.now();
      const rec: FaultRecord = { kind, atMs, doneMs: atMs, boundMs: boundOf(kind), gapsMs: [] };
      // Bounded: a fault that never finishes (a helper waiting on a promise that cannot settle)
      // fails the run naming it, instead of leaving it silent.
      const inject = async () => {
        if (kind === 'kill' || kind === 'term' || kind === 'stop') {
          const serving = routing.list();
          const target = serving[Math.floor(rand() * serving.length)]!;
          rec.target = target.id;
          routing.remove(target);
          if (kind === 'stop') {
            target.kill('SIGSTOP');
            await sleep(replicaPauseMs);
            target.kill('SIGCONT');
            routing.add(target);
          } else {
            target.kill(kind === 'kill' ? 'SIGKILL' : 'SIGTERM');
            exits.push(target.proc.exited);
            const replacement = await fleet.addReplica(nextId());
            rec.replacement = replacement.id;
            routing.add(replacement);
          }
        } else if (kind === 'redis-restart') {
          await fleet.redis!.restart({ keepData: true });
        } else if (kind === 'redis-cut' || kind === 'upstream-cut') {
          const serving = routing.list();
          const target = serving[Math.floor(rand() * serving.length)]!;
          rec.target = target.id;
          const p = proxies.get(target.id)!;
          const proxy = kind === 'redis-cut' ? p.redis! : p.upstream;
          proxy.set(kind === 'redis-cut' ? { kind: 'blackhole' } : { kind: 'cut' });
          await sleep(networkFaultMs);
          proxy.set({ kind: 'pass' });
        } else if (kind === 'latency') {
          for (const p of proxies.values()) {
            p.redis?.set({ kind: 'delay', delayMs: 100 });
            p.upstream.set({ kind: 'delay', delayMs: 500 });
          }
          await sleep(networkFaultMs);
          for (const p of proxies.values()) for (const x of [p.redis, p.upstream]) x?.set({ kind: 'pass' });
        } else if (kind === 'failover') {
          const { old, primary } = await fleet.sentinel!.failover();
          rec.target = `redis :${old.port} → :${primary.port}`;
          await fleet.sentinel!.rejoin(old);
        } else {
          fleet.redis!.pause();
          await sleep(redisPauseMs);
          fleet.redis!.resume();
        }
      };
      await deadline(inject(), FAULT_DEADLINE_MS, `fault ${faults.length + 1} (${kind})`);
      rec.doneMs = Date.now();
      rss.max = Math.max(rss.max, emulatorRss());
      faults.push(rec);
      log(
        `  fault ${faults.length} at +${((atMs - phaseStart) / 1000).toFixed(1)} s: ${kind}${rec.target ? ` ${rec.target}` : ''}${rec.replacement ? ` → ${rec.replacement}` : ''} (${rec.doneMs - atMs} ms)`,
      );
    }
    // Settle: the last fault's gap must be measurable.
    await sleep(Math.max(...faults.map((f) => f.boundMs), failoverBoundMs) + slackMs + 2000);
    await Promise.race([Promise.all(exits), sleep(15_000)]);
    const faultEnd = Date.now();
    rss.end = emulatorRss();
    rss.max = Math.max(rss.max, rss.end);

    for (const f of faults) f.gapsMs = clients.filter((c) => !c.fatal || c.fatal.atMs > f.atMs).map((c) => c.gapAcross(f.atMs));

    // ── Before any delete: what ended on its own, the limit ──
    const records = await Promise.all(clients.map((c) => fleet.session(c.streamId).catch(() => undefined)));
    const ended: ChaosReport['ended'] = [];
    clients.forEach((c, i) => {
      const r = records[i];
      const storeEnded = !r || r.state !== 'active';
      if (c.fatal || storeEnded) {
        ended.push({
          streamId: c.streamId,
          close: c.fatal ? `${c.fatal.code} ${c.fatal.reason}` : undefined,
          storeReason: r ? String(r.endReason ?? r.state) : 'no record',
        });
      }
    });
    const slotsAfter = await Promise.all(keys.map(async (k) => Number(await fleet.redisCall('ZCARD', `lg:slots:{${keyHash(k)}}`))));
    const sixthCreate: number[] = [];
    const extra: { id: string; key: string }[] = [];
    for (const k of keys) {
      const c = await createRetrying(routing, k, body);
      sixthCreate.push(c.status);
      if (c.id) extra.push({ id: c.id, key: k });
    }

    // ── Delete everything; nothing may be left behind ──
    cleaning = true;
    for (const c of clients) c.stopKeepalives();
    const del = async (id: string, key: string) => {
      for (let attempt = 0; attempt < 5; attempt++) {
        const r = await fetch(`${routing.pick().url}/v0.2/streams/${id}`, {
          method: 'DELETE',
          headers: { authorization: `Bearer ${key}` },
        }).then(
          async (x) => (await x.arrayBuffer(), x.status),
          () => 0,
        );
        if (r === 200 || r === 204 || r === 404) return r;
        await sleep(1000);
      }
      return -1;
    };
    const deleteStatuses = await Promise.all([...clients.map((c) => del(c.streamId, c.key)), ...extra.map((e) => del(e.id, e.key))]);
    await Promise.all(clients.map((c) => c.closedWithin(10_000)));
    const closes = clients.map((c) => (c.fatal && c.fatal.atMs >= faultEnd ? `${c.fatal.code} ${c.fatal.reason}` : undefined));
    const leftovers = { slots: -1, upstreamStreams: -1 };
    for (const until = Date.now() + 45_000; Date.now() < until; await sleep(500)) {
      const slotKeys = await scanKeys(fleet, 'lg:slots:*');
      leftovers.slots = (await Promise.all(slotKeys.map(async (k) => Number(await fleet.redisCall('ZCARD', k))))).reduce(
        (a, b) => a + b,
        0,
      );
      const state = (await fetch(`${fleet.emulatorUrl}/_emulator/state`).then((r) => r.json())) as { streams: { id: string }[] };
      leftovers.upstreamStreams = state.streams.filter(
        (s) => clients.some((c) => c.streamId === s.id) || extra.some((e) => e.id === s.id),
      ).length;
      if (leftovers.slots === 0 && leftovers.upstreamStreams === 0) break;
    }

    // ── Invariants ──
    const allGaps = clients.flatMap((c) => c.arrivals.slice(1).map((a, i) => a - c.arrivals[i]!));
    check(
      'no stream ends unless asked',
      ended.length === 0,
      ended.length === 0
        ? `${clients.length} streams, none ended`
        : `${ended.length} ended: ${reasonsOf(ended.map((e) => e.storeReason ?? e.close ?? '?'))}`,
    );
    const dups = clients.reduce((s, c) => s + c.duplicates, 0);
    check('no result delivered twice', dups === 0, `${dups} duplicate result ids`);
    const late = faults.flatMap((f, i) =>
      f.gapsMs.filter((g) => g > f.boundMs + slackMs).map((g) => `fault ${i + 1} (${f.kind}): ${fmtMs(g)} > ${fmtMs(f.boundMs + slackMs)}`),
    );
    check(
      'every stream delivers again within the bound after each fault',
      late.length === 0,
      late.length === 0 ? `${faults.length} faults` : late.slice(0, 8).join('; ') + (late.length > 8 ? ` (+${late.length - 8})` : ''),
    );
    const limitOk = slotsAfter.every((s) => s === perKey) && sixthCreate.every((s) => s === 429);
    check(
      'the 5-stream limit is exact afterwards',
      limitOk,
      `slots per key ${slotsAfter.join(',')}; sixth create ${sixthCreate.join(',')}`,
    );
    const badDeletes = deleteStatuses.filter((s) => s !== 200 && s !== 204);
    const badCloses = closes.filter((c, i) => !ended.some((e) => e.streamId === clients[i]!.streamId) && c !== '1001 client_requested');
    const kaFailed = clients.reduce((s, c) => s + c.keepalivesFailed, 0);
    check(
      'every keepalive succeeds within the SDK retries',
      kaFailed === 0,
      `${kaFailed} of ${clients.reduce((s, c) => s + c.keepalivesSent, 0)} failed after ${KEEPALIVE_RETRIES} retries${kaFailed ? ` (last answers: ${reasonsOf(clients.flatMap((c) => c.keepaliveFailures.map((f) => `${f.status} from ${f.replica}`)))})` : ''}`,
    );
    check(
      'nothing left behind once all are deleted',
      leftovers.slots === 0 && leftovers.upstreamStreams === 0 && badDeletes.length === 0,
      `slots ${leftovers.slots}, upstream streams ${leftovers.upstreamStreams}, deletes not 200/204: ${badDeletes.length}`,
    );
    check(
      'a deleted stream closes its socket 1001 client_requested',
      badCloses.length === 0,
      `${badCloses.length} of ${clients.length - ended.length} did not${badCloses.length ? `: ${reasonsOf(badCloses.map((c) => c ?? 'still open'))}` : ''}`,
    );
    return {
      seed: opts.seed,
      store,
      streams: clients.length,
      faults,
      results: clients.reduce((s, c) => s + c.arrivals.length, 0),
      gapsMs: allGaps,
      failoverBoundMs,
      reconnects: clients.reduce((s, c) => s + c.reconnects, 0),
      keepalives: { sent: clients.reduce((s, c) => s + c.keepalivesSent, 0), failed: clients.reduce((s, c) => s + c.keepalivesFailed, 0) },
      duplicates: dups,
      ended,
      endedLines,
      slotsAfter,
      sixthCreate,
      leftovers,
      fleetEvents,
      warnings,
      emulatorRssMiB: rss,
      invariants,
      ok: invariants.every((i) => i.ok),
    };
  } finally {
    routing.stop();
    for (const c of clients) c.close();
    await fleet.stop();
    await Promise.all([...proxies.values()].flatMap((p) => [p.redis?.close(), p.upstream.close()]));
  }
}

async function scanKeys(fleet: Fleet, pattern: string): Promise<string[]> {
  const out: string[] = [];
  let cursor = '0';
  do {
    const [next, batch] = (await fleet.redisCall('SCAN', cursor, 'MATCH', pattern, 'COUNT', 1000)) as [string, string[]];
    cursor = next;
    out.push(...batch);
  } while (cursor !== '0');
  return out;
}

const fmtMs = (ms: number) => (Number.isFinite(ms) ? `${(ms / 1000).toFixed(2)} s` : 'none after');

function reasonsOf(reasons: string[]): string {
  const counts = new Map<string, number>();
  for (const r of reasons) counts.set(r, (counts.get(r) ?? 0) + 1);
  return [...counts].map(([r, n]) => `${n}× ${r}`).join(', ');
}

const dist = (xs: number[]) =>
  xs.length === 0
    ? 'no samples'
    : `p50 ${fmtMs(quantile(xs, 0.5))}, p99 ${fmtMs(quantile(xs, 0.99))}, max ${fmtMs(Math.max(...xs))} (n=${xs.length})`;

/** The report as printed by the bench (and by the test on failure). */
export function formatChaos(r: ChaosReport): string {
  const lines: string[] = [];
  const byKind = new Map<FaultKind, number>();
  for (const f of r.faults) byKind.set(f.kind, (byKind.get(f.kind) ?? 0) + 1);
  lines.push(
    `seed ${r.seed} on ${r.store === 'sentinel' ? 'a Sentinel set' : 'one Redis'}; ${r.streams} streams; faults ${r.faults.length} (${[...byKind].map(([k, n]) => `${k} ${n}`).join(', ')})`,
  );
  lines.push(
    `results ${r.results}; reconnects ${r.reconnects}; keepalives ${r.keepalives.sent} (failed after retries: ${r.keepalives.failed}); duplicates ${r.duplicates}`,
  );
  lines.push(`gap between consecutive results: ${dist(r.gapsMs)}; failover bound (docs/scaling.md) ${fmtMs(r.failoverBoundMs)}`);
  for (const kind of [...FAULT_KINDS, 'failover' as const]) {
    const gaps = r.faults.filter((f) => f.kind === kind).flatMap((f) => f.gapsMs);
    if (gaps.length)
      lines.push(`  gap across ${kind.padEnd(13)} ${dist(gaps)}; bound ${fmtMs(r.faults.find((f) => f.kind === kind)!.boundMs)}`);
  }
  lines.push(
    `streams ended before the deletes: ${r.ended.length}${r.ended.length ? ` (${reasonsOf(r.ended.map((e) => `${e.storeReason ?? '?'} / socket ${e.close ?? 'open'}`))})` : ''}`,
  );
  if (r.endedLines.length) lines.push(`  replicas logged: ${reasonsOf(r.endedLines.map((l) => `${l.reason} on ${l.replica}`))}`);
  lines.push(`slots per key after the faults ${r.slotsAfter.join(',')}; a sixth create answered ${r.sixthCreate.join(',')}`);
  lines.push(`left after deleting all: ${r.leftovers.slots} slots, ${r.leftovers.upstreamStreams} upstream streams`);
  lines.push(
    `fleet events: ${Object.entries(r.fleetEvents)
      .map(([k, n]) => `${k} ${n}`)
      .join('; ')}`,
  );
  const { start, max, end } = r.emulatorRssMiB;
  lines.push(`emulator RSS ${start} MiB before the faults, at most ${max} MiB after one, ${end} MiB at the end`);
  const warned = Object.entries(r.warnings).sort((a, b) => b[1] - a[1]);
  if (warned.length) lines.push(`replica warnings: ${warned.map(([m, n]) => `${n}× ${m}`).join('; ')}`);
  for (const i of r.invariants) lines.push(`${i.ok ? 'PASS' : 'FAIL'} ${i.name}: ${i.detail}`);
  return lines.join('\n');
}

/**
 * `npm run bench rolling`: a rolling deploy of three replicas behind HAProxy (haproxy.ts), on real
 * processes (fleet.ts: redis-server, the emulator, replica CLIs), while clients stream through
 * the balancer: BENCH_ROLLING_STREAMS streams (default 24) at 1 Hz in frame mode, half webrtc (a
 * @roamhq/wrtc sender per stream in this process, wrtc-sender.ts), half native (the emulator's
 * synthetic publisher), one results socket each, a keepalive per stream every 5 s. A client whose
 * socket closes without an end (1001) reconnects through the balancer at once, as the Python SDK
 * does (browser SDKs would have ended the stream instead). Prints
 *  - the result gap each client saw across the deploy (the longest wait between two results from
 *    the last one before the first SIGTERM; p50/p99/max, all streams and by source), sockets closed
 *    by the server and streams ended, keepalive failures;
 *  - how long the old replicas live after SIGTERM with live connections (clients stay
 *    BENCH_ROLLING_HOLD_S seconds, default 5, after the deploy, then leave: native clients reconnect
 *    through the balancer, webrtc clients DELETE their stream and close the peer), and how long
 *    after their last client left they exit;
 *  - the same without live connections: a second deploy of the new replicas once no client holds
 *    a socket (they still schedule every native stream).
 */
import WebSocket from 'ws';
import type { Config } from '../src/config';
import { createStream, startFleet } from '../test/helpers/fleet';
import type { Fleet } from '../test/helpers/fleet';
import { startHaproxy } from '../test/helpers/haproxy';
import type { Balancer } from '../test/helpers/haproxy';
import { replaceReplica } from '../test/helpers/rolling';
import type { ReplacedReplica } from '../test/helpers/rolling';
import { quantile } from '../test/helpers/util';
import { MAIN, waitUntil } from './util';
import { startWebrtcSender } from '../test/helpers/wrtc-sender';
import type { WebrtcSender } from '../test/helpers/wrtc-sender';

const INTERVAL_S = 1;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const seconds = (ms: number) => (Number.isFinite(ms) ? `${(ms / 1000).toFixed(2)} s` : '∞');

/** A legacy client of one stream: results socket through the balancer, reconnecting unless the stream ended. */
class Client {
  readonly arrivals: number[] = [];
  readonly closes: string[] = [];
  ended: string | undefined;
  /** The client DELETEd its stream (it keeps it alive no more). */
  deleted = false;
  reconnects = 0;
  private ws: WebSocket | undefined;
  private leaving = false;

  constructor(
    readonly id: string,
    readonly kind: 'webrtc' | 'native',
    private readonly url: string,
    private readonly key: string,
    readonly sender?: WebrtcSender,
  ) {}

  connect(): void {
    const ws = new WebSocket(`${this.url.replace(/^http/, 'ws')}/v0.2/ws/streams/${this.id}`);
    this.ws = ws;
    ws.on('open', () => ws.send(JSON.stringify({ api_key: this.key })));
    ws.on('message', () => this.arrivals.push(Date.now()));
    ws.on('error', () => undefined);
    ws.on('close', (code, reason) => {
      if (this.leaving || this.ws !== ws) return;
      this.closes.push(`${code} ${reason.toString() || '(no reason)'}`);
      if (code === 1001) {
        this.ended = reason.toString();
        return;
      }
      this.reconnects++;
      setTimeout(() => this.connect(), 100);
    });
  }

  /** Closes the socket (no reconnect); `reconnect` opens a new one through the balancer. */
  leave(reconnect: boolean): void {
    this.leaving = true;
    const old = this.ws;
    this.ws = undefined;
    old?.close();
    if (reconnect) {
      this.leaving = false;
      this.connect();
    }
  }

  /** The longest wait between two results from the last one before `fromMs` (∞ once the stream ended). */
  gapSince(fromMs: number): number {
    if (this.ended !== undefined) return Infinity;
    const start = this.arrivals.filter((t) => t < fromMs).at(-1) ?? fromMs;
    const times = [start, ...this.arrivals.filter((t) => t >= fromMs)];
    let gap = 0;
    for (let i = 1; i < times.length; i++) gap = Math.max(gap, times[i]! - times[i - 1]!);
    return gap;
  }
}

async function openClients(fleet: Fleet, lb: Balancer, key: string, n: number): Promise<Client[]> {
  const body = {
    mode: 'frame',
    processing: { interval_seconds: INTERVAL_S },
    inference: { prompt: 'Describe the frame', model: 'local/analyzer-mini', max_output_tokens: 32 },
  };
  const clients: Client[] = [];
  for (let i = 0; i < n; i++) {
    const webrtc = i % 2 === 0;
    const sender = webrtc ? await startWebrtcSender({ width: 160, height: 120, fps: 5 }) : undefined;
    const created = await createStream(lb.url, key, sender ? { ...body, source: { type: 'webrtc', sdp: sender.offer } } : body);
    if (!created.id) {
      sender?.close();
      throw new Error(`create answered ${created.status}: ${JSON.stringify(created.body)}`);
    }
    if (sender) await sender.answer((created.body as { webrtc: { sdp: string } }).webrtc.sdp);
    else await fleet.publish(created.id, { fps: 2, width: 64, height: 48 });
    const c = new Client(created.id, webrtc ? 'webrtc' : 'native', lb.url, key, sender);
    c.connect();
    clients.push(c);
  }
  return clients;
}

/** Keepalives through the balancer every 5 s per stream until `stop()`; failures counted. */
function keepAlive(lb: Balancer, key: string, clients: readonly Client[]): { failures: string[]; stop(): Promise<void> } {
  const failures: string[] = [];
  let on = true;
  const loop = (async () => {
    while (on) {
      for (const c of clients) {
        if (c.ended !== undefined || c.deleted || !on) continue;
        const r = await fetch(`${lb.url}/v0.2/streams/${c.id}/keepalive`, {
          method: 'POST',
          headers: { authorization: `Bearer ${key}` },
        }).catch(() => undefined);
        if (!r?.ok && c.ended === undefined && !c.deleted) failures.push(String(r?.status ?? 'network error'));
        await r?.text();
      }
      await sleep(5000);
    }
  })();
  return {
    failures,
    stop: async () => {
      on = false;
      await loop;
    },
  };
}

function summary(values: number[]): string {
  if (values.length === 0) return 'none';
  return `p50 ${seconds(quantile(values, 0.5))}  p99 ${seconds(quantile(values, 0.99))}  max ${seconds(Math.max(...values))}  (n=${values.length})`;
}

function counted(items: string[]): string {
  const m = new Map<string, number>();
  for (const i of items) m.set(i, (m.get(i) ?? 0) + 1);
  return [...m].map(([k, v]) => `${k} ×${v}`).join(', ') || 'none';
}

/** SIGTERM → exit of each step, and (when given) how long after `leftAtMs` it came. */
function lifetimes(steps: readonly ReplacedReplica[], leftAtMs?: number): string {
  return steps
    .map((s) => {
      const e = s.exited();
      if (!e) return `${s.old.id} still running`;
      const after =
        leftAtMs === undefined
          ? ''
          : e.atMs >= leftAtMs
            ? `, ${seconds(e.atMs - leftAtMs)} after its clients left`
            : ', before its clients left';
      return `${s.old.id} ${seconds(e.atMs - s.termAtMs)} (exit ${e.code ?? e.signal}${after})`;
    })
    .join('; ');
}

async function deploy(fleet: Fleet, lb: Balancer, pairs: [string, string][]): Promise<ReplacedReplica[]> {
  const steps: ReplacedReplica[] = [];
  for (const [old, next] of pairs) steps.push(await replaceReplica(fleet, lb, old, next));
  return steps;
}

export async function benchRolling(cfg: Config): Promise<void> {
  const n = Math.max(2, Number(process.env.BENCH_ROLLING_STREAMS ?? 24));
  const holdMs = Number(process.env.BENCH_ROLLING_HOLD_S ?? 5) * 1000;
  const key = `${cfg.brand}-local-dev`;
  const fleet = await startFleet({
    main: MAIN,
    logLevel: 'warn',
    keepLines: false,
    publisher: false,
    env: { LEGACY_MAX_STREAMS_PER_KEY: String(n + 10), LEGACY_LEASE_TTL_SECONDS: '3600', BRAND: cfg.brand },
    emulatorEnv: { BRAND: cfg.brand },
    config: { legacy: { firstFramePollMs: 200 } },
  });
  let lb: Balancer | undefined;
  let clients: Client[] = [];
  try {
    lb = await startHaproxy({ servers: fleet.replicas.map((r) => ({ name: r.id, url: r.url })) });
    clients = await openClients(fleet, lb, key, n);
    const ready = await waitUntil(() => clients.every((c) => c.arrivals.length >= 3), 90_000);
    const ka = keepAlive(lb, key, clients);

    // With live connections: every socket (and, with LEGACY_WEBRTC_MODE=relay, every relay) is on A, B or C when the deploy starts.
    const deployAt = Date.now();
    const steps = await deploy(fleet, lb, [
      ['A', 'D'],
      ['B', 'E'],
      ['C', 'F'],
    ]);
    const deployedAt = Date.now();
    await waitUntil(() => clients.every((c) => c.ended !== undefined || c.arrivals.filter((t) => t > deployedAt).length >= 3), 30_000);
    await sleep(holdMs);
    const gaps = (kind?: string) =>
      clients
        .filter((c) => !kind || c.kind === kind)
        .map((c) => c.gapSince(deployAt))
        .filter(Number.isFinite);
    const ended = clients.filter((c) => c.ended !== undefined);
    const stillRunning = steps.filter((s) => !s.exited()).length;

    // The clients leave the old replicas: native ones reconnect through the balancer, webrtc ones end their stream.
    const leftAt = Date.now();
    for (const c of clients) {
      if (c.kind === 'native') c.leave(true);
      else {
        c.leave(false);
        c.deleted = true;
        if (c.ended === undefined)
          await fetch(`${lb.url}/v0.2/streams/${c.id}`, { method: 'DELETE', headers: { authorization: `Bearer ${key}` } })
            .then((r) => r.text())
            .catch(() => undefined);
        c.sender?.close();
      }
    }
    await Promise.race([Promise.all(steps.map((s) => s.exit)), sleep(60_000)]);
    await ka.stop();

    console.log(
      `rolling deploy A,B,C → D,E,F behind haproxy: ${n} streams at 1 Hz (${clients.filter((c) => c.kind === 'webrtc').length} webrtc, ${clients.filter((c) => c.kind === 'native').length} native), one socket each through the balancer${ready ? '' : ' (some never got 3 results before the deploy)'}`,
    );
    console.log(`  deploy took ${seconds(deployedAt - deployAt)} (new replica up in the balancer, old one SIGTERMed and counted down, ×3)`);
    console.log(`  result gap per stream across the deploy   all    ${summary(gaps())}`);
    console.log(`                                             native ${summary(gaps('native'))}`);
    console.log(`                                             webrtc ${summary(gaps('webrtc'))}`);
    console.log(
      `  sockets closed by the server: ${counted(clients.flatMap((c) => c.closes))}; reconnects ${clients.reduce((k, c) => k + c.reconnects, 0)}`,
    );
    console.log(
      `  streams ended by the deploy: ${ended.length}/${n}${ended.length ? ` (${counted(ended.map((c) => `${c.kind} ${c.ended}`))})` : ''}; keepalive failures through the balancer: ${ka.failures.length ? counted(ka.failures) : '0'}`,
    );
    console.log(`  old replicas with live connections, SIGTERM → exit: ${lifetimes(steps, leftAt)}`);
    console.log(`    (still running ${seconds(holdMs)} after the deploy, while their clients stayed: ${stillRunning}/3)`);

    // Without live connections: the clients close their sockets; the new replicas still schedule the native streams.
    for (const c of clients) c.leave(false);
    await sleep(1000);
    const bare = await deploy(fleet, lb, [
      ['D', 'G'],
      ['E', 'H'],
      ['F', 'I'],
    ]);
    await Promise.race([Promise.all(bare.map((s) => s.exit)), sleep(60_000)]);
    const live = (await fleet.upstreamStreams()).length;
    console.log(
      `  old replicas without live connections (each scheduling native streams), SIGTERM → exit: ${lifetimes(bare)}; upstream streams still active after both deploys: ${live}`,
    );
  } finally {
    for (const c of clients) {
      c.leave(false);
      c.sender?.close();
    }
    await lb?.stop();
    await fleet.stop();
  }
}

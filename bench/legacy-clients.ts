/**
 * The client side of the adapter benches, run as its own process so its CPU is not the gateway's:
 * creates N legacy streams, opens one results socket each, keeps leases alive (each stream every
 * 20 s from its create, as legacy clients renew at ttl/2), counts results and duplicate result ids.
 * Given several gateway URLs (replicas), stream i (counted from `first`) is created on `urls[i % n]`
 * and its socket opened on the next one; given several keys, stream i uses `keys[i % k]`.
 * Protocol on stdout: `READY <json stream ids>`, then `COUNT <json counts so far>` when asked with a
 * line on stdin, and `DONE` once every stream is deleted (after `STOP` on stdin).
 */
import readline from 'node:readline';
import WebSocket from 'ws';

interface Args {
  url: string;
  /** Replicas to spread over (default: `url` alone). */
  urls?: string[];
  key: string;
  /** Keys to spread over (default: `key` alone). */
  keys?: string[];
  streams: number;
  /** Index of this process's first stream among all clients' (the replica and key spread continue across processes). */
  first?: number;
  body: Record<string, unknown>;
}

/** What the clients have seen so far (`COUNT`). */
export interface ClientCounts {
  results: number;
  /** Results with `ok: false`. */
  failures: number;
  /** Results whose id arrived before (published twice). */
  duplicates: number;
  keepalives: number;
  keepaliveFailures: number;
  /** Results sockets still open. */
  open: number;
}

const KEEPALIVE_MS = 20_000;

async function pool<T>(items: T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: limit }, async () => {
      while (next < items.length) await fn(items[next++]!);
    }),
  );
}

async function main(): Promise<void> {
  const args = JSON.parse(process.argv[2]!) as Args;
  const urls = args.urls ?? [args.url];
  const keys = args.keys ?? [args.key];
  const headers = (key: string) => ({ authorization: `Bearer ${key}`, 'content-type': 'application/json' });
  const streams: { id: string; url: string; key: string }[] = [];
  const sockets: WebSocket[] = [];
  const timers: NodeJS.Timeout[] = [];
  const seen = new Set<string>();
  const counts: ClientCounts = { results: 0, failures: 0, duplicates: 0, keepalives: 0, keepaliveFailures: 0, open: 0 };
  const keepalive = (s: { id: string; url: string; key: string }) =>
    void fetch(`${s.url}/v0.2/streams/${s.id}/keepalive`, { method: 'POST', headers: headers(s.key) }).then(
      (r) => {
        counts.keepalives += 1;
        if (!r.ok) counts.keepaliveFailures += 1;
        return r.arrayBuffer();
      },
      () => (counts.keepaliveFailures += 1),
    );
  await pool(
    Array.from({ length: args.streams }, (_, i) => (args.first ?? 0) + i),
    32,
    async (i) => {
      const url = urls[i % urls.length]!;
      const key = keys[i % keys.length]!;
      const res = await fetch(`${url}/v0.2/streams`, { method: 'POST', headers: headers(key), body: JSON.stringify(args.body) });
      if (res.status !== 201) throw new Error(`create failed: ${res.status} ${await res.text()}`);
      const stream = { id: ((await res.json()) as { stream_id: string }).stream_id, url, key };
      streams.push(stream);
      const ws = new WebSocket(`${urls[(i + 1) % urls.length]!.replace(/^http/, 'ws')}/v0.2/ws/streams/${stream.id}`);
      await new Promise<void>((resolve, reject) => {
        ws.once('open', () => {
          ws.send(JSON.stringify({ api_key: key }));
          resolve();
        });
        ws.once('error', reject);
      });
      ws.on('message', (data) => {
        const message = JSON.parse(data.toString()) as { id?: string; ok?: boolean };
        counts.results += 1;
        if (!message.ok) counts.failures += 1;
        if (message.id !== undefined) {
          if (seen.has(message.id)) counts.duplicates += 1;
          else seen.add(message.id);
        }
      });
      sockets.push(ws);
      // Renewed every 20 s from its own create, the first at a random point: spread, and never near the lease.
      timers.push(
        setTimeout(
          () => (keepalive(stream), timers.push(setInterval(() => keepalive(stream), KEEPALIVE_MS))),
          Math.random() * KEEPALIVE_MS,
        ),
      );
    },
  );
  process.stdout.write(`READY ${JSON.stringify(streams.map((s) => s.id))}\n`);

  const rl = readline.createInterface({ input: process.stdin });
  for await (const line of rl) {
    if (line === 'COUNT')
      process.stdout.write(
        `COUNT ${JSON.stringify({ ...counts, open: sockets.filter((ws) => ws.readyState === WebSocket.OPEN).length })}\n`,
      );
    if (line === 'STOP') break;
  }
  for (const t of timers) clearTimeout(t);
  await pool(streams, 32, async (s) => {
    await fetch(`${s.url}/v0.2/streams/${s.id}`, { method: 'DELETE', headers: headers(s.key) }).catch(() => {});
  });
  for (const ws of sockets) ws.terminate();
  process.stdout.write('DONE\n');
  process.exit(0);
}

if (require.main === module) {
  main().catch((err: unknown) => {
    process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
    process.exit(1);
  });
}

/**
 * The client side of the adapter bench, run as its own process so its CPU is not the gateway's:
 * creates N legacy clip streams, opens one results socket each, keeps leases alive, counts results.
 * Protocol on stdout: `READY <json stream ids>`, then `COUNT <n>` when asked with a line on stdin,
 * and `DONE` once every stream is deleted (after `STOP` on stdin).
 */
import readline from 'node:readline';
import WebSocket from 'ws';

interface Args {
  url: string;
  key: string;
  streams: number;
  model: string;
  body: Record<string, unknown>;
}

async function pool<T>(items: T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(Array.from({ length: limit }, async () => {
    while (next < items.length) await fn(items[next++]!);
  }));
}

async function main(): Promise<void> {
  const args = JSON.parse(process.argv[2]!) as Args;
  const headers = { authorization: `Bearer ${args.key}`, 'content-type': 'application/json' };
  const ids: string[] = [];
  const sockets: WebSocket[] = [];
  let results = 0;
  let failures = 0;
  await pool(Array.from({ length: args.streams }, (_, i) => i), 32, async () => {
    const res = await fetch(`${args.url}/v0.2/streams`, { method: 'POST', headers, body: JSON.stringify(args.body) });
    if (res.status !== 201) throw new Error(`create failed: ${res.status} ${await res.text()}`);
    const id = ((await res.json()) as { stream_id: string }).stream_id;
    ids.push(id);
    const ws = new WebSocket(`${args.url.replace(/^http/, 'ws')}/v0.2/ws/streams/${id}`);
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => {
        ws.send(JSON.stringify({ api_key: args.key }));
        resolve();
      });
      ws.once('error', reject);
    });
    ws.on('message', (data) => {
      results += 1;
      if (!(JSON.parse(data.toString()) as { ok: boolean }).ok) failures += 1;
    });
    sockets.push(ws);
  });
  // Legacy clients renew every ttl/2; spread the renewals over that period.
  const keepalive = setInterval(() => {
    for (const id of ids) {
      setTimeout(() => void fetch(`${args.url}/v0.2/streams/${id}/keepalive`, { method: 'POST', headers }).catch(() => {}), Math.random() * 20_000);
    }
  }, 20_000);
  process.stdout.write(`READY ${JSON.stringify(ids)}\n`);

  const rl = readline.createInterface({ input: process.stdin });
  for await (const line of rl) {
    if (line === 'COUNT') process.stdout.write(`COUNT ${JSON.stringify({ results, failures })}\n`);
    if (line === 'STOP') break;
  }
  clearInterval(keepalive);
  await pool(ids, 32, async (id) => {
    await fetch(`${args.url}/v0.2/streams/${id}`, { method: 'DELETE', headers }).catch(() => {});
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

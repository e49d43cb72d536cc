/**
 * `npm run demo`: a terminal client that uses only the legacy /v0.2 interface, the way an unchanged
 * customer program does: create a stream, open the results socket, keep the lease alive, print
 * results as they arrive, delete the stream on Ctrl-C (or after --seconds).
 */
import WebSocket from 'ws';
import { brandOf } from './brand';
import type { Config } from './config';
import { dialHost } from './lib/listen';

interface DemoOptions {
  url: string;
  key: string;
  mode: 'clip' | 'frame';
  model: string;
  prompt: string;
  seconds: number;
}

/** The demo's flags, already checked by the CLI's parser (src/cli.ts). */
export interface DemoArgs {
  url?: string;
  key?: string;
  mode: string;
  model: string;
  prompt: string;
  seconds: string;
}

function options(cfg: Config, values: DemoArgs): DemoOptions {
  const mode = values.mode === 'frame' ? 'frame' : 'clip';
  return {
    url: (values.url ?? process.env.GATEWAY_URL ?? `http://${dialHost(cfg.host)}:${cfg.port}`).replace(/\/$/, ''),
    key: values.key ?? process.env.API_KEY ?? `${brandOf(cfg).keyPrefix}local-dev`,
    mode,
    model: values.model,
    prompt: values.prompt,
    seconds: Number(values.seconds) || 0,
  };
}

const dim = (s: string) => (process.stdout.isTTY ? `\x1b[2m${s}\x1b[0m` : s);
const bold = (s: string) => (process.stdout.isTTY ? `\x1b[1m${s}\x1b[0m` : s);

async function call(o: DemoOptions, method: string, path: string, body?: unknown): Promise<{ status: number; json: unknown }> {
  const res = await fetch(`${o.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${o.key}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, json: text ? (JSON.parse(text) as unknown) : null };
}

export async function runDemo(cfg: Config, args: DemoArgs): Promise<void> {
  const o = options(cfg, args);
  console.log(bold(`legacy demo → ${o.url}/v0.2 (mode ${o.mode}, model ${o.model})`));
  const body =
    o.mode === 'clip'
      ? {
          mode: 'clip',
          processing: { target_fps: 2, clip_length_seconds: 2, delay_seconds: 2 },
          inference: { prompt: o.prompt, model: o.model },
        }
      : { mode: 'frame', processing: { interval_seconds: 1 }, inference: { prompt: o.prompt, model: o.model } };
  let created;
  try {
    created = await call(o, 'POST', '/v0.2/streams', body);
  } catch (err) {
    console.error(`cannot reach the gateway at ${o.url}: ${(err as Error).message}\nstart it first with: npm start`);
    process.exit(1);
  }
  if (created.status !== 201) {
    console.error(`create failed: ${created.status} ${JSON.stringify(created.json)}`);
    process.exit(1);
  }
  const res = created.json as { stream_id: string; lease: { ttl_seconds: number } };
  const id = res.stream_id;
  console.log(`stream ${bold(id)} created; lease ${res.lease.ttl_seconds}s; waiting for results (Ctrl-C to stop)…`);

  const ws = new WebSocket(`${o.url.replace(/^http/, 'ws')}/v0.2/ws/streams/${id}`);
  ws.on('open', () => ws.send(JSON.stringify({ api_key: o.key })));
  let n = 0;
  ws.on('message', (data) => {
    const r = JSON.parse(data.toString()) as {
      ok: boolean;
      result: string;
      error: string | null;
      model_name: string;
      inference_latency_ms: number;
      total_latency_ms: number;
    };
    n += 1;
    const head = dim(`#${n} ${new Date().toISOString().slice(11, 19)} ${r.model_name} ${r.inference_latency_ms}/${r.total_latency_ms} ms`);
    console.log(`${head}\n  ${r.ok ? r.result.replace(/\n/g, '\n  ') : `error: ${r.error}`}`);
  });

  const keepalive = setInterval(
    () => {
      call(o, 'POST', `/v0.2/streams/${id}/keepalive`)
        .then(({ status, json }) => {
          if (status !== 200) console.error(`keepalive failed: ${status} ${JSON.stringify(json)}`);
          else {
            const k = json as { state: string; credits_remaining_cents: number; cost_cents: number };
            console.log(
              dim(`keepalive: state ${k.state}, credits ${k.credits_remaining_cents}¢, cost since last ${k.cost_cents.toFixed(4)}¢`),
            );
          }
        })
        .catch((err: unknown) => console.error(`keepalive failed: ${(err as Error).message}`));
    },
    (res.lease.ttl_seconds * 1000) / 2,
  );

  let finishing = false;
  const finish = async (why: string) => {
    finishing = true;
    clearInterval(keepalive);
    const del = await call(o, 'DELETE', `/v0.2/streams/${id}`).catch(() => ({ status: 0, json: null }));
    console.log(`${why}; deleted stream (${del.status}); ${n} results received`);
    process.exit(0);
  };
  ws.on('close', (code, reason) => {
    clearInterval(keepalive);
    console.log(`socket closed ${code} ${reason.toString()}`);
    if (!finishing) process.exit(code === 1001 ? 0 : 1);
  });
  process.once('SIGINT', () => void finish('interrupted'));
  if (o.seconds > 0) setTimeout(() => void finish(`${o.seconds}s elapsed`), o.seconds * 1000);
}

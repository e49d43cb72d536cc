/**
 * A /v1beta + /billing upstream that answers every call a legacy stream makes at once, so the
 * gateway is what a bench measures: create (a random stream id), get (a frame already there, so a
 * stream starts ticking at its first poll), keepalive, delete, viewer token, models, chat
 * completions (a fixed answer, no frame decoded), balance and pricing. Nothing is remembered: any
 * stream id is an active stream, any bearer key an account with credits (its account id derived
 * from the key, so every worker and every replica's account cache agree).
 *
 * Runs as its own process: `node fast-upstream.js '{"workers":N,"brandField":"svc","room":"room"}'`.
 * The primary forks N `node:cluster` workers sharing one loopback port and prints
 * `READY {"port":P,"pids":[…]}` once they all listen; it ends them when it gets SIGTERM or its
 * parent goes away (stdin closes).
 */
import cluster from 'node:cluster';
import { createHash, randomUUID } from 'node:crypto';
import http from 'node:http';

export interface FastUpstreamArgs {
  workers: number;
  /** The brand's response field, holding a completion's cache details. */
  brandField: string;
  /** `publish.type` of a created stream (the media-room vendor). */
  room: string;
}

const MODELS = ['local/analyzer-mini', 'local/analyzer'];
const TTL_SECONDS = 300;

function send(res: http.ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

const accountOf = (key: string) => `acct-${createHash('sha256').update(key).digest('hex').slice(0, 24)}`;

function serve(args: FastUpstreamArgs, startedAtMs: number): http.Server {
  const publish = (id: string) => ({ type: args.room, url: 'ws://127.0.0.1:9/room', token: `publish-${id}` });
  const streamView = (id: string, now: number) => ({
    id,
    state: 'active',
    stream_time_ms: now - startedAtMs,
    first_frame_at_ms: startedAtMs,
    last_frame_at_ms: now - 50,
    last_frame_index: Math.floor((now - startedAtMs) / 1000),
    first_available_frame_at_ms: startedAtMs,
    first_available_frame_index: 0,
    created_at_ms: startedAtMs,
    recent_fps: 1,
    retained_frame_count: 10,
    evicted_frame_count: 0,
    expires_at_ms: now + TTL_SECONDS * 1000,
    ttl_seconds: TTL_SECONDS,
    ended_at_ms: null,
    end_reason: null,
    audio: false,
  });
  const pricing = (model: string) => ({
    id: `price-${model}`,
    model,
    provider: 'local',
    version: '2026-01-01',
    input_microcents_per_token: 2,
    output_microcents_per_token: 8,
    cached_input_microcents_per_token: 1,
    public: true,
  });

  return http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const now = Date.now();
      const path = (req.url ?? '/').split('?')[0]!;
      const method = req.method ?? 'GET';
      if (path === '/healthz') return send(res, 200, { ok: true });
      if (path === '/v1beta/models') {
        return send(res, 200, {
          object: 'list',
          data: MODELS.map((id) => ({ id, object: 'model', created: 1_767_225_600, owned_by: 'local', status: 'ready' })),
        });
      }
      if (path.startsWith('/billing/pricing/')) return send(res, 200, pricing(decodeURIComponent(path.slice('/billing/pricing/'.length))));
      const key = /^Bearer (\S+)$/.exec(req.headers.authorization ?? '')?.[1];
      if (!key) return send(res, 401, { error: { code: 'unauthorized', message: 'Missing API key' } });
      if (path === '/billing/accounts/me/balance')
        return send(res, 200, { user_id: accountOf(key), balance_microcents: 1e12, balance_cents: 1e8 });
      if (path === '/v1beta/streams' && method === 'POST') {
        const id = randomUUID();
        return send(res, 201, {
          id,
          state: 'active',
          publish: publish(id),
          expires_at_ms: now + TTL_SECONDS * 1000,
          ttl_seconds: TTL_SECONDS,
        });
      }
      if (path === '/v1beta/chat/completions' && method === 'POST') {
        let body: { model?: unknown; thread_id?: unknown } = {};
        try {
          body = JSON.parse(Buffer.concat(chunks).toString()) as typeof body;
        } catch {
          return send(res, 400, { error: { code: 'invalid_request', message: 'body is not JSON' } });
        }
        return send(res, 200, {
          id: `chatcmpl-${randomUUID()}`,
          object: 'chat.completion',
          created: Math.floor(now / 1000),
          model: typeof body.model === 'string' ? body.model : MODELS[0],
          choices: [{ index: 0, message: { role: 'assistant', content: 'A test pattern on a grey background.' }, finish_reason: 'stop' }],
          usage: { prompt_tokens: 96, completion_tokens: 9, total_tokens: 105 },
          [args.brandField]: {
            cache: { thread_id: typeof body.thread_id === 'string' ? body.thread_id : null, cache_hit: false, cached_input_tokens: 0 },
          },
        });
      }
      const m = /^\/v1beta\/streams\/([^/]+)(\/keepalive|\/viewer-token)?$/.exec(path);
      if (m) {
        const id = decodeURIComponent(m[1]!);
        if (!m[2] && method === 'GET') return send(res, 200, streamView(id, now));
        if (!m[2] && method === 'DELETE') return send(res, 200, { id, deleted: true });
        if (m[2] === '/keepalive' && method === 'POST') {
          const { expires_at_ms, ttl_seconds, stream_time_ms } = streamView(id, now);
          return send(res, 200, { id, state: 'active', expires_at_ms, ttl_seconds, stream_time_ms, publish: publish(id) });
        }
        if (m[2] === '/viewer-token' && method === 'POST')
          return send(res, 200, { view: { url: 'ws://127.0.0.1:9/room', token: `view-${id}`, expires_in_seconds: 300 } });
      }
      send(res, 404, { error: { code: 'not_found', message: `${method} ${path}` } });
    });
  });
}

function primary(args: FastUpstreamArgs): void {
  const startedAtMs = Date.now();
  const workers = Array.from({ length: Math.max(1, args.workers) }, () =>
    cluster.fork({ FAST_UPSTREAM_STARTED_AT_MS: String(startedAtMs) }),
  );
  let stopping = false;
  const stop = (code: number) => {
    stopping = true;
    for (const w of workers) w.process.kill('SIGKILL');
    process.exit(code);
  };
  let listening = 0;
  cluster.on('listening', (_worker, address) => {
    if (++listening === workers.length)
      process.stdout.write(`READY ${JSON.stringify({ port: address.port, pids: workers.map((w) => w.process.pid) })}\n`);
  });
  // A worker that dies makes the figures meaningless: say so and stop.
  cluster.on('exit', (w, code, signal) => {
    if (stopping) return;
    process.stderr.write(`fast-upstream: worker ${w.process.pid} exited (${code ?? signal})\n`);
    stop(1);
  });
  process.once('SIGTERM', () => stop(0));
  process.once('SIGINT', () => stop(0));
  process.stdin.resume();
  process.stdin.once('end', () => stop(0));
}

function worker(args: FastUpstreamArgs): void {
  const server = serve(args, Number(process.env.FAST_UPSTREAM_STARTED_AT_MS));
  server.keepAliveTimeout = 120_000;
  // Port 0 in a cluster: the primary picks one port and every worker shares it.
  server.listen(0, '127.0.0.1');
  // The primary is gone (even SIGKILLed): nobody will end this worker otherwise.
  process.once('disconnect', () => process.exit(0));
}

if (require.main === module) {
  const args = JSON.parse(process.argv[2] ?? '{}') as FastUpstreamArgs;
  if (cluster.isPrimary) primary(args);
  else worker(args);
}

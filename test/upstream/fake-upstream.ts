/**
 * A scripted fake /v1beta upstream on 127.0.0.1:0 for the client tests: each request takes the
 * next scripted handler (the last one repeats), and every request is recorded with its arrival time.
 */
import http from 'node:http';
import type { Socket } from 'node:net';
import { listen } from '../../src/lib/listen';

export interface SeenRequest {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
  /** performance.now() when the request's body had fully arrived. */
  at: number;
}

export type Handler = (req: http.IncomingMessage, res: http.ServerResponse, seen: SeenRequest) => void;

export class FakeUpstream {
  readonly requests: SeenRequest[] = [];
  /** TCP connections accepted so far (keep-alive reuse shows as a small number). */
  connections = 0;
  private script: Handler[] = [];
  private readonly sockets = new Set<Socket>();

  private constructor(
    private readonly server: http.Server,
    readonly url: string,
  ) {}

  static async start(...script: Handler[]): Promise<FakeUpstream> {
    const server = http.createServer();
    const port = await listen(server, 0, '127.0.0.1');
    const fake = new FakeUpstream(server, `http://127.0.0.1:${port}`);
    fake.script = script;
    server.on('connection', (s: Socket) => {
      fake.connections++;
      fake.sockets.add(s);
      s.once('close', () => fake.sockets.delete(s));
    });
    server.on('request', (req, res) => fake.handle(req, res));
    return fake;
  }

  /** Replaces the script. */
  reply(...script: Handler[]): void {
    this.script = script;
  }

  /** Gaps in ms between consecutive requests' arrivals. */
  gaps(): number[] {
    return this.requests.slice(1).map((r, i) => r.at - this.requests[i]!.at);
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const seen: SeenRequest = {
        method: req.method ?? '',
        url: req.url ?? '',
        headers: req.headers,
        body: Buffer.concat(chunks).toString('utf8'),
        at: performance.now(),
      };
      this.requests.push(seen);
      const handler = this.script.length > 1 ? this.script.shift()! : this.script[0];
      if (handler) handler(req, res, seen);
      else json(404, { detail: 'Not Found' })(req, res, seen);
    });
  }
}

export const json =
  (status: number, body: unknown, headers: Record<string, string> = {}): Handler =>
  (_req, res) => {
    const text = JSON.stringify(body);
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers });
    res.end(text);
  };

/** The contract's stream-shaped error body. */
export const streamErr = (status: number, code: string, headers: Record<string, string> = {}): Handler =>
  json(status, { detail: { error: { message: `${code} happened`, type: 'stream_error', code } } }, headers);

/** Destroys the connection after the request arrived: the client gets no answer. */
export const reset: Handler = (req) => req.socket.destroy();

/** Never answers (headers timeout). */
export const hang: Handler = () => undefined;

/** Sends 200 headers and the start of a body, then stalls (body timeout after the body started). */
export const stallBody: Handler = (_req, res) => {
  res.writeHead(200, { 'content-type': 'application/json' });
  res.write('{"id":');
};

export const sampleStream = (id: string) => ({
  id,
  state: 'active',
  publish: { type: 'room', url: 'wss://room.example/rtc', token: 'publish-token-secret' },
  expires_at_ms: Date.now() + 300_000,
  ttl_seconds: 300,
});

export const sampleCompletion = (model: string) => ({
  id: `chatcmpl-${model}`,
  object: 'chat.completion',
  created: Math.floor(Date.now() / 1000),
  model,
  choices: [{ index: 0, message: { role: 'assistant', content: `answer from ${model}`, tool_calls: [] }, finish_reason: 'stop' }],
  usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
  svc: { cache: { thread_id: 't-1', cache_hit: false, cached_input_tokens: 0 } },
});

/** A bare LiveKit-protocol signalling client (ws + protobuf) for protocol-level assertions. */
import { gzipSync } from 'node:zlib';
import { JoinRequest, SignalRequest, SignalResponse, WrappedJoinRequest, WrappedJoinRequest_Compression } from '@livekit/protocol';
import WebSocket from 'ws';
import { sleep } from '../../helpers/time';

export type Response = SignalResponse['message'];
export type ResponseOf<C extends NonNullable<Response['case']>> = Extract<Response, { case: C }>['value'];
type RequestMessage = NonNullable<ConstructorParameters<typeof SignalRequest>[0]>['message'];

/** base64url WrappedJoinRequest (gzip by default, as livekit-client sends it). */
export function joinRequestParam(join: ConstructorParameters<typeof JoinRequest>[0] = {}, gzip = true): string {
  const bytes = new JoinRequest(join).toBinary();
  const wrapped = new WrappedJoinRequest({
    compression: gzip ? WrappedJoinRequest_Compression.GZIP : WrappedJoinRequest_Compression.NONE,
    joinRequest: gzip ? gzipSync(bytes) : bytes,
  });
  return Buffer.from(wrapped.toBinary()).toString('base64url');
}

export class RawClient {
  readonly messages: Response[] = [];
  closed = false;
  closeCode = 0;
  received = 0;
  firstCase: Response['case'] = undefined;
  private readonly waiters: (() => void)[] = [];

  private constructor(readonly ws: WebSocket) {
    ws.on('message', (data: Buffer) => {
      const message = SignalResponse.fromBinary(new Uint8Array(data)).message;
      if (this.received === 0) this.firstCase = message.case;
      this.received += 1;
      this.messages.push(message);
      this.wake();
    });
    ws.on('close', (code) => {
      this.closed = true;
      this.closeCode = code;
      this.wake();
    });
    ws.on('error', () => undefined);
  }

  private wake(): void {
    for (const w of this.waiters.splice(0)) w();
  }

  /** Opens a signalling socket; rejects with the HTTP status when the upgrade is refused. */
  static connect(url: string, headers: Record<string, string> = {}): Promise<RawClient> {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(url, { headers });
      ws.once('open', () => resolve(new RawClient(ws)));
      ws.once('unexpected-response', (_req, res) => {
        let body = '';
        res.on('data', (chunk: Buffer) => (body += chunk.toString()));
        res.on('end', () => reject(Object.assign(new Error(`HTTP ${res.statusCode}: ${body}`), { status: res.statusCode, body })));
        ws.on('error', () => undefined);
      });
      ws.once('error', reject);
    });
  }

  send(message: RequestMessage): void {
    this.ws.send(new SignalRequest({ message }).toBinary());
  }

  /** The next message of `kind` not yet taken (messages of other kinds stay queued). */
  async next<C extends NonNullable<Response['case']>>(kind: C, timeoutMs = 5000): Promise<ResponseOf<C>> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const index = this.messages.findIndex((m) => m.case === kind);
      if (index >= 0) return this.messages.splice(index, 1)[0].value as ResponseOf<C>;
      if (this.closed) throw new Error(`socket closed before ${kind} (had ${this.messages.map((m) => m.case).join(',')})`);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no ${kind} within ${timeoutMs} ms (had ${this.messages.map((m) => m.case).join(',')})`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  /** Waits for the first message ever received and returns its kind. */
  async firstKind(timeoutMs = 5000): Promise<Response['case']> {
    const deadline = Date.now() + timeoutMs;
    while (this.received === 0) {
      if (this.closed || Date.now() > deadline) throw new Error('no message');
      await sleep(10);
    }
    return this.firstCase;
  }

  async waitClosed(timeoutMs = 5000): Promise<number> {
    const deadline = Date.now() + timeoutMs;
    while (!this.closed) {
      if (Date.now() > deadline) throw new Error('socket still open');
      await sleep(20);
    }
    return this.closeCode;
  }

  close(): void {
    if (!this.closed) this.ws.terminate();
  }
}

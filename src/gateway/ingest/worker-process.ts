/**
 * One media worker process (./media-worker.ts) seen from the process that forked it: requests
 * answered by number, the worker's events (a lost source, a frame size, its figures every second),
 * its exit. ./worker-relay.ts supervises these; the conformance kit uses one for its test pattern.
 */
import { fork } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { ServiceError } from '../../lib/errors';
import type { ErrorShape } from '../../lib/errors';
import type { LegacyMedia } from '../legacy';
import type { FromWorker, RelayRequest, ToWorker, WireError } from './worker-protocol';

export interface WorkerProcessOptions {
  /** The worker's script (default: media-worker.js beside this module, in dist/ and in bundles). */
  script?: string;
  /** Node options of the worker (tests give a loader). */
  execArgv?: string[];
  init: Extract<ToWorker, { op: 'init' }>;
  /** How long the worker may take to say it is ready. */
  readyTimeoutMs?: number;
}

export type WorkerEvent = Extract<FromWorker, { op: 'lost' | 'frameSize' | 'stats' }>;

/** A request the worker could not answer because it died (or was never up). */
export class WorkerGone extends Error {
  override name = 'WorkerGone';
}

export function defaultWorkerScript(): string {
  return path.join(__dirname, 'media-worker.js');
}

/** A legacy error as the worker sent it, a ServiceError again. */
function unwire(e: WireError): ServiceError {
  return new ServiceError(e.status, e.code, e.message, { shape: (e.shape as ErrorShape | undefined) ?? 'legacy', details: e.details });
}

export class MediaWorkerProcess {
  readonly child: ChildProcess;
  /** Resolves once the worker is up; rejects when it died or stayed silent first. */
  readonly ready: Promise<void>;
  /** Resolves when the process has exited. */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** When the worker last said anything (its figures come every second). */
  lastHeardAtMs = Date.now();
  private readonly pending = new Map<number, { resolve(m: FromWorker): void; reject(err: Error): void }>();
  private nextReq = 1;
  private gone = false;

  constructor(
    opts: WorkerProcessOptions,
    private readonly onEvent: (e: WorkerEvent) => void,
  ) {
    const script = opts.script ?? defaultWorkerScript();
    if (!fs.existsSync(script)) throw new WorkerGone(`media worker script not found: ${script} (npm run build writes it)`);
    this.child = fork(script, [], { execArgv: opts.execArgv ?? [], stdio: ['ignore', 'inherit', 'inherit', 'ipc'], serialization: 'json' });
    this.exited = new Promise((resolve) => {
      this.child.once('exit', (code, signal) => {
        this.gone = true;
        for (const p of this.pending.values())
          p.reject(new WorkerGone(`the media worker ${signal ? `was killed by ${signal}` : `exited ${code}`}`));
        this.pending.clear();
        resolve({ code, signal });
      });
    });
    // A failed spawn or a closed channel shows as 'exit' (or never started: 'error' then 'exit').
    this.child.on('error', () => undefined);
    this.ready = new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        reject(new WorkerGone(`the media worker did not start within ${opts.readyTimeoutMs ?? 10_000} ms`));
        this.kill('SIGKILL');
      }, opts.readyTimeoutMs ?? 10_000);
      timer.unref();
      void this.exited.then(() => {
        clearTimeout(timer);
        reject(new WorkerGone('the media worker exited before it was ready'));
      });
      this.child.on('message', (m: FromWorker) => {
        this.lastHeardAtMs = Date.now();
        if (m.op === 'ready') {
          clearTimeout(timer);
          resolve();
        } else if (m.op === 'started' || m.op === 'failed' || m.op === 'stopped') {
          const p = this.pending.get(m.req);
          this.pending.delete(m.req);
          p?.resolve(m);
        } else {
          onEvent(m);
        }
      });
    });
    this.ready.catch(() => undefined);
    this.send(opts.init);
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  get alive(): boolean {
    return !this.gone;
  }

  private send(message: ToWorker): boolean {
    if (this.gone || !this.child.connected) return false;
    this.child.send(message, (err) => {
      if (err) this.kill('SIGKILL');
    });
    return true;
  }

  private request(make: (req: number) => ToWorker): Promise<FromWorker> {
    const req = this.nextReq++;
    return new Promise((resolve, reject) => {
      if (this.gone) return reject(new WorkerGone('the media worker is gone'));
      this.pending.set(req, { resolve, reject });
      if (!this.send(make(req))) {
        this.pending.delete(req);
        reject(new WorkerGone('the media worker is gone'));
      }
    });
  }

  /** Starts a relay; resolves with what the create response needs, or rejects with its legacy error. */
  async start(relay: RelayRequest): Promise<LegacyMedia> {
    const m = await this.request((req) => ({ op: 'start', req, relay }));
    if (m.op === 'failed') throw unwire(m.error);
    if (m.op !== 'started') throw new Error(`unexpected answer ${m.op}`);
    return m.media;
  }

  /** Publishes the conformance test pattern into a room until `stop(streamId)`. */
  async pattern(streamId: string, url: string, token: string): Promise<void> {
    const m = await this.request((req) => ({ op: 'pattern', req, streamId, url, token }));
    if (m.op === 'failed') throw unwire(m.error);
  }

  async stop(streamId: string): Promise<void> {
    await this.request((req) => ({ op: 'stop', req, streamId }));
  }

  renew(streamId: string, token: string): void {
    this.send({ op: 'renew', streamId, token });
  }

  kill(signal: NodeJS.Signals): void {
    if (!this.gone) this.child.kill(signal);
  }

  /** Asks the worker to release everything and exit; SIGKILLs it after `graceMs`. */
  async close(graceMs = 5000): Promise<void> {
    if (this.gone) return;
    this.send({ op: 'close' });
    const timer = setTimeout(() => this.kill('SIGKILL'), graceMs);
    await this.exited;
    clearTimeout(timer);
  }
}

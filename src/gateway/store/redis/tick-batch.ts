import type { ScriptConn } from './connection';

/** Commits per script call at most (8 arguments each). */
const MAX_BATCH = 64;

/** A commit's answer: `[1, promptRev, leaseExpiresAtMs]` or `[0, reason, '']` (the script's three values). */
export type CommitAnswer = [number, string, string];

interface Queued {
  key: string;
  args: (string | number)[];
  resolve(answer: CommitAnswer): void;
  reject(err: unknown): void;
}

/**
 * Tick commits gathered into one script call: the commits a replica makes within `windowMs` of the
 * first one (or, with 0, in one turn of the event loop: completions that answered together) go as
 * one EVALSHA and one round trip instead of one each. The window is what a result may wait before
 * it is published; a full batch (MAX_BATCH) is sent at once. Each commit is still checked on its
 * own inside the script; a failed call fails every commit it carried. On a Cluster the record
 * hashes lie in any slot: each commit is its own call there.
 */
export class TickBatch {
  private queue: Queued[] = [];
  private scheduled = false;

  constructor(
    private readonly redis: ScriptConn,
    private readonly windowMs = 0,
  ) {}

  /** Commits one tick (`args`: the script's 8 for it); its answer. */
  commit(key: string, args: (string | number)[]): Promise<CommitAnswer> {
    if (this.redis.isCluster) return this.redis.commitTicksLua(1, key, ...args) as Promise<CommitAnswer>;
    return new Promise((resolve, reject) => {
      this.queue.push({ key, args, resolve, reject });
      if (this.queue.length >= MAX_BATCH) this.send();
      else if (!this.scheduled) {
        this.scheduled = true;
        const due = () => {
          this.scheduled = false;
          this.send();
        };
        if (this.windowMs > 0) setTimeout(due, this.windowMs);
        else setImmediate(due);
      }
    });
  }

  private send(): void {
    const batch = this.queue;
    if (!batch.length) return;
    this.queue = [];
    this.redis.commitTicksLua(batch.length, ...batch.map((q) => q.key), ...batch.flatMap((q) => q.args)).then(
      (flat) => {
        const answers = flat as (number | string)[];
        batch.forEach((q, i) => q.resolve([answers[3 * i] as number, answers[3 * i + 1] as string, answers[3 * i + 2] as string]));
      },
      (err: unknown) => {
        for (const q of batch) q.reject(err);
      },
    );
  }
}

import type { Logger } from '../../../lib/logger';
import { StoreUnavailableError } from '../store';
import { resetIfTimedOut } from './connection';
import type { ScriptConn } from './connection';
import type { RedisKeys } from './keys';

/** What the store's roles share: the command connection, the key layout, the log and the error guard. */
export class RedisContext {
  /** The last Redis error reply logged (one line per distinct reply, not one per call), store-wide. */
  private lastReply = '';

  constructor(
    readonly redis: ScriptConn,
    readonly key: RedisKeys,
    readonly log?: Logger,
  ) {}

  /**
   * Every store call runs through here: a Redis failure (connection gone, command timed out, an
   * error reply) becomes StoreUnavailableError (503 `store_unavailable`). Timing and outage
   * tracking are the gateway's `measuredStore` around the whole store, not done here twice.
   */
  async guard<T>(op: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      // A nested call (updateRecord → getRecord) was wrapped already.
      if (err instanceof StoreUnavailableError) throw err;
      // A bug here (a record that does not parse, a wrong type) is not an outage: a 500, logged.
      if (err instanceof TypeError || err instanceof SyntaxError || err instanceof RangeError || err instanceof ReferenceError) throw err;
      // Redis answered with an error (out of memory, read-only replica, a script bug): worth a line;
      // connection errors are logged once per state change by connect().
      if (err instanceof Error && err.name === 'ReplyError' && err.message !== this.lastReply) {
        this.lastReply = err.message;
        this.log?.error({ err: err.message, op }, 'redis refused a store call');
      }
      resetIfTimedOut(this.redis, err);
      throw new StoreUnavailableError(op, err);
    }
  }
}

/** One role of the store (an interface `Store` is made of), on the context every role shares. */
export abstract class RedisRole {
  protected readonly redis: ScriptConn;
  protected readonly key: RedisKeys;
  protected readonly log: Logger | undefined;

  constructor(private readonly context: RedisContext) {
    this.redis = context.redis;
    this.key = context.key;
    this.log = context.log;
  }

  protected guard<T>(op: string, fn: () => Promise<T>): Promise<T> {
    return this.context.guard(op, fn);
  }
}

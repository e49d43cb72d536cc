import { Cluster } from 'ioredis';
import type { Broker, Unsubscribe } from '../store';
import type { Conn } from './connection';
import { RedisRole } from './role';
import type { RedisContext } from './role';

/** Pub/sub: publishes on the command connection, subscribes on the subscriber connection. */
export class RedisBroker extends RedisRole implements Broker {
  /** Local subscribers per channel; one Redis subscription per channel however many sockets listen. */
  private readonly channels = new Map<string, { handlers: Set<(m: string) => void>; subscribed: Promise<unknown> }>();

  constructor(
    context: RedisContext,
    private readonly sub: Conn,
  ) {
    super(context);
    sub.on('message', (channel: string, message: string) => {
      for (const fn of this.channels.get(this.key.channelName(channel))?.handlers ?? []) fn(message);
    });
  }

  /**
   * On a Cluster a message reaches other nodes' subscribers over the cluster bus, in order per
   * publishing node only: so a channel is published from the node of the session named by its last
   * `:` segment (`results:<streamId>` → where commitTick publishes), and a stream's end can never
   * overtake its last results.
   */
  async publish(channel: string, message: string): Promise<void> {
    return this.guard('publish', async () => {
      if (this.redis instanceof Cluster) {
        const route = this.key.session(channel.slice(channel.lastIndexOf(':') + 1));
        await this.redis.publishFromLua(route, this.key.channel(channel), message);
      } else await this.redis.publish(this.key.channel(channel), message);
    });
  }

  /** Resolves once Redis confirmed the subscription: every message published after that arrives. */
  async subscribe(channel: string, onMessage: (message: string) => void): Promise<Unsubscribe> {
    return this.guard('subscribe', async () => {
      const name = this.key.channel(channel);
      let entry = this.channels.get(channel);
      if (!entry) {
        entry = { handlers: new Set(), subscribed: this.sub.subscribe(name) };
        this.channels.set(channel, entry);
      }
      const { handlers, subscribed } = entry;
      handlers.add(onMessage);
      try {
        await subscribed;
      } catch (err) {
        handlers.delete(onMessage);
        if (this.channels.get(channel)?.handlers === handlers && handlers.size === 0) this.channels.delete(channel);
        throw err;
      }
      let done = false;
      return () => {
        if (done) return;
        done = true;
        handlers.delete(onMessage);
        if (handlers.size > 0 || this.channels.get(channel)?.handlers !== handlers) return;
        this.channels.delete(channel);
        // Same connection, so ordered after the SUBSCRIBE; a later subscribe re-subscribes after it.
        this.sub.unsubscribe(name).catch(() => undefined);
      };
    });
  }

  /** Forgets every local subscriber (the store is closing). */
  clear(): void {
    this.channels.clear();
  }
}

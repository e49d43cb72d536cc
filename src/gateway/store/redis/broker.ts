import { Cluster } from 'ioredis';
import { ChannelSubscribers } from '../channel-subscribers';
import type { Broker, Unsubscribe } from '../store';
import type { Conn } from './connection';
import { RedisRole } from './role';
import type { RedisContext } from './role';

/** Pub/sub: publishes on the command connection, subscribes on the subscriber connection. */
export class RedisBroker extends RedisRole implements Broker {
  /** Local subscribers per channel; one Redis subscription per channel however many listen. */
  private readonly subscribers: ChannelSubscribers;

  constructor(
    context: RedisContext,
    private readonly sub: Conn,
  ) {
    super(context);
    this.subscribers = new ChannelSubscribers({
      open: (channel) => this.sub.subscribe(this.key.channel(channel)),
      // Same connection, so ordered after the SUBSCRIBE; a later subscribe re-subscribes after it.
      close: (channel) => void this.sub.unsubscribe(this.key.channel(channel)).catch(() => undefined),
    });
    sub.on('message', (channel: string, message: string) => this.subscribers.deliver(this.key.channelName(channel), message));
  }

  /**
   * On a Cluster a message reaches other nodes' subscribers over the cluster bus, in order per
   * publishing node only: so a channel is published from the node of its `route`'s record (for
   * `results:<streamId>`, where commitTick publishes), and a stream's end can never overtake its last results.
   */
  async publish(channel: string, message: string, route: string): Promise<void> {
    return this.guard('publish', async () => {
      if (this.redis instanceof Cluster) await this.redis.publishFromLua(this.key.record(route), this.key.channel(channel), message);
      else await this.redis.publish(this.key.channel(channel), message);
    });
  }

  /** Resolves once Redis confirmed the subscription: every message published after that arrives. */
  async subscribe(channel: string, onMessage: (message: string) => void): Promise<Unsubscribe> {
    return this.guard('subscribe', () => this.subscribers.subscribe(channel, onMessage));
  }

  /** Forgets every local subscriber (the store is closing). */
  clear(): void {
    this.subscribers.clear();
  }
}

import { ChannelSubscribers } from '../channel-subscribers';
import type { Broker, Unsubscribe } from '../store';

/** Pub/sub in one process: one order, so the route (see `Broker`) is a Cluster's concern only. */
export class MemoryBroker implements Broker {
  private readonly subscribers = new ChannelSubscribers();

  async publish(channel: string, message: string, _route: string): Promise<void> {
    this.subscribers.deliver(channel, message);
  }

  async subscribe(channel: string, onMessage: (message: string) => void): Promise<Unsubscribe> {
    return this.subscribers.add(channel, onMessage);
  }

  clear(): void {
    this.subscribers.clear();
  }
}

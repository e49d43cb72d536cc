import type { Broker, Unsubscribe } from './store';

/** How a store opens and closes its own subscription to a channel (Redis: SUBSCRIBE/UNSUBSCRIBE). */
export interface ChannelTransport {
  /** Resolves once subscribed: every message published after that arrives. */
  open(channel: string): Promise<unknown>;
  close(channel: string): void;
}

const IN_PROCESS: ChannelTransport = { open: async () => undefined, close: () => undefined };

/**
 * The local subscribers of each channel, shared by every store: one subscription per channel
 * however many subscribers listen; the first subscriber opens it, the last one's unsubscribe closes it.
 * In one process it is the whole broker (the memory store's `Broker` role: a publish is a delivery,
 * in one order, so the route is a Cluster's concern only); the Redis broker fans its one Redis
 * subscription per channel out through it.
 */
export class ChannelSubscribers implements Broker {
  private readonly channels = new Map<string, { handlers: Set<(m: string) => void>; opened: Promise<unknown> }>();

  constructor(private readonly transport: ChannelTransport = IN_PROCESS) {}

  /** A message of `channel` to each of its subscribers, in the order they subscribed. */
  deliver(channel: string, message: string): void {
    for (const fn of this.channels.get(channel)?.handlers ?? []) fn(message);
  }

  /** Resolves once the channel's subscription is open; a failed one is forgotten (the next subscriber tries again). */
  async subscribe(channel: string, onMessage: (message: string) => void): Promise<Unsubscribe> {
    let entry = this.channels.get(channel);
    if (!entry) {
      entry = { handlers: new Set(), opened: this.transport.open(channel) };
      this.channels.set(channel, entry);
    }
    const { handlers, opened } = entry;
    handlers.add(onMessage);
    try {
      await opened;
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
      this.transport.close(channel);
    };
  }

  async publish(channel: string, message: string, _route: string): Promise<void> {
    this.deliver(channel, message);
  }

  /** Forgets every subscriber (the store is closing). */
  clear(): void {
    this.channels.clear();
  }
}

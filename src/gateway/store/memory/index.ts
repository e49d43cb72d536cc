/**
 * The embedded default store: one process, no persistence, one class per role of `Store` as in
 * ../redis/. Several gateways built on one instance behave as replicas of a fleet (the in-process
 * tests of ownership and failover use that).
 */
import { realClock } from '../../../lib/timers';
import type { Clock } from '../../../lib/timers';
import { ChannelSubscribers } from '../channel-subscribers';
import { composeStore } from '../compose';
import type { Store } from '../store';
import { MemoryClaims } from './claims';
import { MemoryCounters } from './counters';
import { MemoryFeedback } from './feedback';
import { MemoryMembers } from './members';
import { MemoryResultWindows } from './result-windows';
import { MemorySlots } from './slots';
import { MemoryStreams } from './streams';

export function memoryStore(opts: { clock?: Pick<Clock, 'now'> } = {}): Store {
  const clock = opts.clock ?? realClock;
  // One process's broker is its local subscribers (../channel-subscribers.ts).
  const broker = new ChannelSubscribers();
  const feedback = new MemoryFeedback();
  const streams = new MemoryStreams(broker, feedback);
  const windows = new MemoryResultWindows(clock);
  const roles = {
    slots: new MemorySlots(clock),
    streams,
    members: new MemoryMembers(clock),
    claims: new MemoryClaims(clock),
    feedback,
    broker,
    counters: new MemoryCounters(),
    windows,
  };
  return composeStore(roles, {
    ready: async () => true,
    close: async () => {
      streams.close();
      broker.clear();
      windows.clear();
    },
  });
}

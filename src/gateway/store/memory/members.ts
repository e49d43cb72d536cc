import type { Clock } from '../../../lib/timers';
import type { Members, Membership } from '../store';

/** Who is alive, draining or impaired, by heartbeats on this process's clock. */
export class MemoryMembers implements Members {
  private readonly heartbeats = new Map<string, number>();
  private readonly draining = new Set<string>();
  private readonly impaired = new Set<string>();

  constructor(private readonly clock: Pick<Clock, 'now'>) {}

  async heartbeat(replica: string): Promise<number> {
    const now = this.clock.now();
    this.heartbeats.set(replica, now);
    return now;
  }

  async membership(deadAfterMs: number): Promise<Membership> {
    const nowMs = this.clock.now();
    const alive: string[] = [];
    const dead: string[] = [];
    for (const [id, at] of this.heartbeats) (nowMs - at > deadAfterMs ? dead : alive).push(id);
    const members = (set: Set<string>) => [...set].filter((r) => this.heartbeats.has(r));
    return { alive, dead, draining: members(this.draining), impaired: members(this.impaired), nowMs };
  }

  async markDraining(replica: string): Promise<void> {
    this.draining.add(replica);
  }

  async markImpaired(replica: string, impaired: boolean): Promise<void> {
    if (impaired) this.impaired.add(replica);
    else this.impaired.delete(replica);
  }

  async forgetReplica(replica: string): Promise<void> {
    this.heartbeats.delete(replica);
    this.draining.delete(replica);
    this.impaired.delete(replica);
  }
}

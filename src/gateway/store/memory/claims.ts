import type { Clock } from '../../../lib/timers';
import type { Claims } from '../store';

/** Run-once claims on this process's clock. */
export class MemoryClaims implements Claims {
  private readonly until = new Map<string, number>();

  constructor(private readonly clock: Pick<Clock, 'now'>) {}

  async claimOnce(key: string, ttlMs: number): Promise<boolean> {
    const now = this.clock.now();
    const until = this.until.get(key);
    if (until !== undefined && until > now) return false;
    this.until.set(key, now + ttlMs);
    return true;
  }
}

import type { HashUpdate } from '../store/store';

/** One hash's pending writes: increments summed, the lowest and highest value seen per field. */
export class PendingHash {
  readonly incr = new Map<string, number>();
  readonly min = new Map<string, number>();
  readonly max = new Map<string, number>();

  add(field: string, by = 1): void {
    this.incr.set(field, (this.incr.get(field) ?? 0) + by);
  }

  lower(field: string, value: number): void {
    const cur = this.min.get(field);
    if (cur === undefined || value < cur) this.min.set(field, value);
  }

  raise(field: string, value: number): void {
    const cur = this.max.get(field);
    if (cur === undefined || value > cur) this.max.set(field, value);
  }
}

/**
 * Telemetry counter writes held in process between flushes: an event costs a Map update, and a
 * flush is one `store.hbatch` whatever the number of events (a stream's ticks, a key's requests).
 */
export class CounterBuffer {
  /** By key prefix, then the rest of the key: an event builds no key string (the passthrough's hot path). */
  private byPrefix = new Map<string, Map<string, PendingHash>>();
  private count = 0;

  /** Hashes with pending writes. */
  get size(): number {
    return this.count;
  }

  /** The pending writes of hash `prefix + id` (created on first use). */
  hash(prefix: string, id: string): PendingHash {
    let ids = this.byPrefix.get(prefix);
    if (!ids) this.byPrefix.set(prefix, (ids = new Map()));
    let h = ids.get(id);
    if (!h) {
      ids.set(id, (h = new PendingHash()));
      this.count++;
    }
    return h;
  }

  /**
   * Takes back updates the store refused (increments add up again, extremes combine). Kept under
   * their whole key: the next batch may name a hash twice, which hbatch applies one after the other.
   */
  restore(updates: readonly HashUpdate[]): void {
    for (const u of updates) {
      const h = this.hash(u.key, '');
      for (const [f, v] of Object.entries(u.incr ?? {})) h.add(f, v);
      for (const [f, v] of Object.entries(u.min ?? {})) h.lower(f, v);
      for (const [f, v] of Object.entries(u.max ?? {})) h.raise(f, v);
    }
  }

  /** Everything pending, as store updates; the buffer starts empty again. */
  take(): HashUpdate[] {
    const out: HashUpdate[] = [];
    for (const [prefix, ids] of this.byPrefix) {
      for (const [id, h] of ids) {
        out.push({ key: prefix + id, incr: Object.fromEntries(h.incr), min: Object.fromEntries(h.min), max: Object.fromEntries(h.max) });
      }
    }
    this.byPrefix = new Map();
    this.count = 0;
    return out;
  }
}

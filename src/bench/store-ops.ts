/**
 * Single writes and reads that are not part of the production store (`Store`), for benches and
 * tests: one counter write per call (what the unbuffered telemetry did), and the slots a key holds.
 * Built on the store's roles, so they behave the same on every implementation.
 */
import type { Counters, Slots } from '../gateway/store/store';

/** Adds `by` to a counter field. */
export function hincr(store: Pick<Counters, 'hbatch'>, key: string, field: string, by = 1): Promise<void> {
  return store.hbatch([{ key, incr: { [field]: by } }]);
}

/** Lowers a field to `value` (sets it when absent). */
export function hsetMin(store: Pick<Counters, 'hbatch'>, key: string, field: string, value: number): Promise<void> {
  return store.hbatch([{ key, min: { [field]: value } }]);
}

/** Raises a field to `value` (sets it when absent). */
export function hsetMax(store: Pick<Counters, 'hbatch'>, key: string, field: string, value: number): Promise<void> {
  return store.hbatch([{ key, max: { [field]: value } }]);
}

/** Slots a key holds now. */
export async function slotsInUse(store: Pick<Slots, 'slotHolders'>, keyHash: string): Promise<number> {
  return (await store.slotHolders(keyHash)).length;
}

import { createHash } from 'node:crypto';

/**
 * Rendezvous (highest random weight) hashing: the replica with the highest sha256(streamId +
 * replica) wins. Every replica computes the same pick from the same list, and a replica leaving
 * moves only its own streams.
 */
export function pickReplica(streamId: string, replicas: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestWeight = '';
  for (const r of replicas) {
    const w = createHash('sha256').update(streamId).update(r).digest('hex');
    if (best === undefined || w > bestWeight || (w === bestWeight && r < best)) {
      best = r;
      bestWeight = w;
    }
  }
  return best;
}

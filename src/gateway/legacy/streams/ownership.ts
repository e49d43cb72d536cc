/**
 * Ownership of a legacy stream (docs/scaling.md): which account may touch it, whether this replica
 * owns it, and where a new owner resumes the grid.
 */
import type { StreamRecord } from '../../store/store';
import type { LegacyRecord } from './ports';

/**
 * The one typed view of a stored record: the legacy adapter is the only writer of stream records,
 * so their `spec` is the `StreamSpec` it wrote.
 */
export function legacyRecord(rec: StreamRecord): LegacyRecord {
  return rec as LegacyRecord;
}

/** The record is of an active stream this replica (`replicaId`) owns. */
export function ownedBy<R extends Pick<StreamRecord, 'state' | 'owner'>>(
  rec: R | null | undefined,
  replicaId: string,
): rec is R & { state: 'active' } {
  return rec?.state === 'active' && rec.owner === replicaId;
}

/**
 * Where a new owner resumes ticking: the next tick after the last published one, and never a tick
 * already due in the past (missed ticks are dropped, not replayed), on the original grid.
 */
export function resumePoint(
  rec: Pick<StreamRecord, 'lastTick' | 'gridStartMs'>,
  intervalMs: number,
  now: number,
): { gridStartMs: number; n: number } {
  const grid = rec.gridStartMs ?? now;
  const n = Math.max(rec.lastTick + 1, Math.ceil((now - grid) / intervalMs));
  return { gridStartMs: grid, n };
}

export type StreamAccess = { ok: true; record: StreamRecord } | { ok: false };

/**
 * May this account touch this stream: unknown, malformed or another account's all answer "not
 * found" in the same words (the provider's v0.2: "Stream not found or not owned by this API key"),
 * so a key cannot tell another account's stream from none: 404 `stream_not_found` over HTTP, 1008
 * `stream_not_found` on the results socket.
 */
export function streamAccess(record: StreamRecord | null | undefined, accountId: string): StreamAccess {
  if (!record || record.accountId !== accountId) return { ok: false };
  return { ok: true, record };
}

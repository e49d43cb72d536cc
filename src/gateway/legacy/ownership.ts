/**
 * Ownership of a legacy stream in a fleet (docs/scaling.md): the record a stream's owner writes,
 * the result id that makes a duplicate tick detectable, and where a new owner resumes the grid.
 */
import { createHash } from 'node:crypto';
import type { SessionRecord } from '../store/store';
import type { LiveSession } from './session-ports';

/** UUID-shaped id of tick `tick` of a stream: the same on every replica, so a duplicate shows. */
export function resultId(streamId: string, tick: number): string {
  const h = createHash('sha256').update(`${streamId}:${tick}`).digest('hex');
  // Version 8 (custom) and the RFC 9562 variant, so it parses as a UUID.
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-8${h.slice(13, 16)}-${((parseInt(h[16]!, 16) & 0x3) | 0x8).toString(16)}${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

/** The store record of a live session, as its owner knows it (create, and re-registering a lost record). */
export function recordOf(s: LiveSession, owner: string, now: number): SessionRecord {
  return {
    streamId: s.streamId,
    keyHash: s.keyHash,
    slotId: s.slotId,
    accountId: s.accountId,
    state: 'active',
    endReason: null,
    createdAtMs: s.createdAtMs,
    endedAtMs: null,
    leaseExpiresAtMs: s.leaseExpiresAtMs,
    prompt: s.prompt,
    promptUpdatedAtMs: now,
    spec: s.spec,
    owner,
    epoch: s.epoch,
    lastTick: s.lastTick,
    gridStartMs: s.gridStartMs,
    costMicrocents: 0,
    lastKeepaliveAtMs: now,
    promptRev: s.promptRev,
    pinned: s.pinned,
    sealedKey: s.sealedKey,
    fallbackModels: [...s.fallbackModels],
    ids: { ...s.ids },
  };
}

/**
 * Where a new owner resumes ticking: the next tick after the last published one, and never a tick
 * already due in the past (missed ticks are dropped, not replayed), on the original grid.
 */
export function resumePoint(rec: Pick<SessionRecord, 'lastTick' | 'gridStartMs'>, intervalMs: number, now: number): { gridStartMs: number; n: number } {
  const grid = rec.gridStartMs ?? now;
  const n = Math.max(rec.lastTick + 1, Math.ceil((now - grid) / intervalMs));
  return { gridStartMs: grid, n };
}

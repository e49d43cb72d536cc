/**
 * The control channel: one pub/sub channel per replica, `control:<replicaId>`, carrying JSON
 * `OwnerMessage`s (`ended`, `prompt`, `adopt`). Delivery is best effort: a lost message is caught
 * by the owner's next tick commit and the periodic owned-streams reconcile.
 */
import type { OwnerMessage } from '../legacy';

export const controlChannel = (replicaId: string): string => `control:${replicaId}`;

export const encodeControl = (msg: OwnerMessage): string => JSON.stringify(msg);

/** The message, or undefined for anything that is not one (never trusted blindly: the store is shared). */
export function parseControl(text: string): OwnerMessage | undefined {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return undefined;
  }
  const m = v as { op?: unknown; streamId?: unknown; reason?: unknown } | null;
  if (!m || typeof m.streamId !== 'string' || m.streamId.length === 0) return undefined;
  if (m.op === 'ended') return typeof m.reason === 'string' ? { op: 'ended', streamId: m.streamId, reason: m.reason } : undefined;
  if (m.op === 'prompt' || m.op === 'adopt') return { op: m.op, streamId: m.streamId };
  return undefined;
}

/**
 * The one builder of a full stream record (`StreamRecord`, ../../store/store.ts): the create's,
 * the one an owner writes from its copy (a create's write, a lost record written back), and those
 * tests and tools put into a store. Fields come out in one order, and an optional field only when
 * given (the Redis store writes every present field).
 */
import type { StreamRecord } from '../../store/store';

/** What every write of a record by its owner sets anew: active, no usage since it. */
type Written = 'state' | 'endReason' | 'endedAtMs' | 'promptUpdatedAtMs' | 'costMicrocents' | 'lastKeepaliveAtMs';

/** What starts as a new stream's unless given. */
type Defaulted = 'createdAtMs' | 'epoch' | 'lastTick' | 'gridStartMs' | 'promptRev' | 'pinned' | 'sealedKey' | 'fallbackModels' | 'ids';

export type StreamRecordInput<Spec> = Omit<StreamRecord<Spec>, Written | Defaulted> &
  Partial<Pick<StreamRecord<Spec>, Defaulted>> & {
    /** When it is written: its prompt's time and its latest keepalive's, and its creation's unless `createdAtMs`. */
    nowMs: number;
  };

/**
 * An active record written at `nowMs`. Unless given: created then, at epoch 1 when it has an owner
 * (its creator's) and 0 when nobody owns it yet, no tick and no grid, prompt revision 0, movable,
 * no sealed key, no fallback models, an empty trace id. The optional fields follow, as given.
 */
export function buildStreamRecord<Spec>(input: StreamRecordInput<Spec>): StreamRecord<Spec> {
  const {
    streamId,
    keyHash,
    slotId,
    accountId,
    nowMs,
    createdAtMs = nowMs,
    leaseExpiresAtMs,
    prompt,
    spec,
    owner,
    epoch = owner === null ? 0 : 1,
    lastTick = -1,
    gridStartMs = null,
    promptRev = 0,
    pinned = false,
    sealedKey = '',
    fallbackModels = [],
    ids = { traceId: '' },
    ...optional
  } = input;
  return {
    streamId,
    keyHash,
    slotId,
    accountId,
    state: 'active',
    endReason: null,
    createdAtMs,
    endedAtMs: null,
    leaseExpiresAtMs,
    prompt,
    promptUpdatedAtMs: nowMs,
    spec,
    owner,
    epoch,
    lastTick,
    gridStartMs,
    costMicrocents: 0,
    lastKeepaliveAtMs: nowMs,
    promptRev,
    pinned,
    sealedKey,
    fallbackModels,
    ids,
    ...optional,
  };
}

/**
 * `rec` as its owner `owner` writes it at `nowMs` (its create, a lost record written back): all
 * it carries, with what every such write sets anew; its lists copied.
 */
export function ownerRecord<Spec>(rec: StreamRecord<Spec>, owner: string, nowMs: number): StreamRecord<Spec> {
  const {
    state: _state,
    endReason: _endReason,
    endedAtMs: _endedAtMs,
    promptUpdatedAtMs: _promptUpdatedAtMs,
    costMicrocents: _costMicrocents,
    lastKeepaliveAtMs: _lastKeepaliveAtMs,
    ...carried
  } = rec;
  return buildStreamRecord({ ...carried, owner, nowMs, fallbackModels: [...rec.fallbackModels], ids: { ...rec.ids } });
}

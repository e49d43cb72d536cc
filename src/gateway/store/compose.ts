/**
 * A store is its roles composed: both stores build one object per role (./memory/, ./redis/) and
 * `composeStore` lays their operations side by side as one `Store`, so neither store writes a
 * forwarding method per operation, and an operation added to a role's interface is listed once here
 * (the compiler refuses a role whose operations are not all listed).
 */
import type { ResultWindows } from './result-windows';
import type { Broker, Claims, Counters, Feedback, Members, Slots, Store, StreamRecords } from './store';

/** The roles a store is made of, one object each. */
export interface StoreRoles {
  slots: Slots;
  streams: StreamRecords;
  members: Members;
  claims: Claims;
  feedback: Feedback;
  broker: Broker;
  counters: Counters;
  windows: ResultWindows;
}

/** Each role's operations by name (the names are the store's metric and span labels too). */
export const STORE_OPS = {
  slots: ['acquireSlot', 'bindSlot', 'restoreSlot', 'slotHolders', 'slotKeys', 'releaseSlot'],
  streams: [
    'putRecord',
    'restoreRecord',
    'getRecord',
    'updateRecord',
    'expireRecord',
    'endStream',
    'renewLease',
    'addCost',
    'setPrompt',
    'claimStream',
    'commitTick',
    'streamsOf',
    'indexedStreams',
  ],
  members: ['heartbeat', 'membership', 'markDraining', 'markImpaired', 'forgetReplica'],
  claims: ['claimOnce'],
  feedback: ['addFeedback', 'feedbackOf'],
  broker: ['publish', 'subscribe'],
  counters: ['hbatch', 'hgetall', 'hdel', 'keys'],
  windows: ['putResultWindow', 'getResultWindow'],
} as const satisfies { [R in keyof StoreRoles]: readonly (keyof StoreRoles[R])[] };

/** An operation of a role that STORE_OPS does not list (must be none). */
type Unlisted = { [R in keyof StoreRoles]: Exclude<keyof StoreRoles[R], (typeof STORE_OPS)[R][number]> }[keyof StoreRoles];
const everyOpListed: [Unlisted] extends [never] ? true : Unlisted = true;
void everyOpListed;

/** The store's own calls beside its roles: readiness and closing. */
export interface StoreLife {
  ready(): Promise<boolean>;
  close(): Promise<void>;
}

/** One `Store` of `roles`' operations (each bound to its role's object) and `life`. */
export function composeStore(roles: StoreRoles, life: StoreLife): Store {
  const store: Record<string, unknown> = { ready: () => life.ready(), close: () => life.close() };
  for (const role of Object.keys(STORE_OPS) as (keyof StoreRoles)[]) {
    const part = roles[role] as unknown as Record<string, (...args: unknown[]) => unknown>;
    for (const op of STORE_OPS[role]) store[op] = part[op]!.bind(part);
  }
  return store as unknown as Store;
}

/** The Redis store (a fleet's shared state); the key layout is in ./keys.ts. */
export { RedisStore } from './redis-store';
export { RedisStoreError, checkMaxmemoryPolicy } from './connection';
export type { RedisStoreOptions } from './redis-store';

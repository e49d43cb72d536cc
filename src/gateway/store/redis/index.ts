/** The Redis store (a fleet's shared state); the key layout is in ./keys.ts. */
export { RedisStore, RedisStoreError, checkMaxmemoryPolicy } from './redis-store';
export type { RedisStoreOptions } from './redis-store';

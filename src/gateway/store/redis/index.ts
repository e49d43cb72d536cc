/** The Redis store (a fleet's shared state); the key layout is in ./keys.ts. */
export { connectRedisStore, redisStore } from './redis-store';
export { RedisStoreError, checkMaxmemoryPolicy, connect } from './connection';
export type { RedisStoreOptions } from './redis-store';

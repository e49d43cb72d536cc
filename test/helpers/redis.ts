/** A real redis-server per test file (src/bench/redis-server.ts, shared with the bench). */
export { startRedis } from '../../src/bench/redis-server';
export type { RedisServer } from '../../src/bench/redis-server';

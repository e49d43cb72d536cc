/** A real redis-server (or a 3-node Redis Cluster) per test file (src/bench/redis-server.ts, shared with the bench). */
export { startRedis, startRedisCluster } from '../../src/bench/redis-server';
export type { RedisCluster, RedisServer } from '../../src/bench/redis-server';

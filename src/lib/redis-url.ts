/**
 * The forms REDIS_URL / store.redisUrl take: `redis://` or `rediss://` (one server, as ioredis reads
 * it) or `redis+cluster://[user:password@]host:port,host:port…` (a Redis Cluster: the seed nodes;
 * `rediss+cluster://` for TLS). No ioredis here: config validation uses it.
 */
export interface ClusterUrl {
  nodes: { host: string; port: number }[];
  username?: string;
  password?: string;
  tls: boolean;
}

const CLUSTER = /^(rediss?)\+cluster:\/\/(?:([^:@/]*)(?::([^@/]*))?@)?([^/?#]+)\/?$/;
const NODE = /^(\[[0-9a-fA-F:.]+\]|[^:[\]]+):(\d{1,5})$/;

/** The seed nodes and credentials of a `redis+cluster://` URL; undefined for any other string. */
export function parseClusterUrl(url: string): ClusterUrl | undefined {
  const m = CLUSTER.exec(url);
  if (!m) return undefined;
  const nodes: ClusterUrl['nodes'] = [];
  for (const part of m[4].split(',')) {
    const n = NODE.exec(part.trim());
    const port = Number(n?.[2]);
    if (!n || port < 1 || port > 65535) return undefined;
    nodes.push({ host: n[1].replace(/^\[|\]$/g, ''), port });
  }
  return {
    nodes,
    ...(m[2] ? { username: decodeURIComponent(m[2]) } : {}),
    ...(m[3] !== undefined ? { password: decodeURIComponent(m[3]) } : {}),
    tls: m[1] === 'rediss',
  };
}

/** A URL the Redis store accepts (config validation). */
export function isRedisUrl(url: string): boolean {
  if (parseClusterUrl(url)) return true;
  if (!/^rediss?:\/\//.test(url)) return false;
  try {
    new URL(url);
    return true;
  } catch {
    return false;
  }
}

/**
 * The forms REDIS_URL / store.redisUrl take: `redis://` or `rediss://` (one server, as ioredis reads
 * it), `redis+cluster://[user:password@]host:port,host:port…` (a Redis Cluster: the seed nodes;
 * `rediss+cluster://` for TLS) or `redis+sentinel://[user:password@]host:port,host:port…/<master
 * name>` (a primary found through Sentinel, which follows its failovers; `rediss+sentinel://` for
 * TLS). No ioredis here: config validation uses it.
 */
export interface ClusterUrl {
  nodes: { host: string; port: number }[];
  username?: string;
  password?: string;
  tls: boolean;
}

/** A `redis+sentinel://` URL: the sentinels to ask, the master name they watch, the primary's credentials. */
export interface SentinelUrl extends ClusterUrl {
  /** The master name the sentinels monitor (`sentinel monitor <name> …`). */
  name: string;
}

const CLUSTER = /^(rediss?)\+cluster:\/\/(?:([^:@/]*)(?::([^@/]*))?@)?([^/?#]+)\/?$/;
const SENTINEL = /^(rediss?)\+sentinel:\/\/(?:([^:@/]*)(?::([^@/]*))?@)?([^/?#]+)\/([^/?#]+)$/;
const NODE = /^(\[[0-9a-fA-F:.]+\]|[^:[\]]+):(\d{1,5})$/;

/** `host:port,host:port…` as nodes; undefined when one is malformed. */
function parseNodes(list: string): ClusterUrl['nodes'] | undefined {
  const nodes: ClusterUrl['nodes'] = [];
  for (const part of list.split(',')) {
    const n = NODE.exec(part.trim());
    const port = Number(n?.[2]);
    if (!n || port < 1 || port > 65535) return undefined;
    nodes.push({ host: n[1].replace(/^\[|\]$/g, ''), port });
  }
  return nodes;
}

/** Nodes, credentials and TLS of a `<scheme>+cluster://` or `<scheme>+sentinel://` match. */
function parsed(m: RegExpExecArray): ClusterUrl | undefined {
  const nodes = parseNodes(m[4]);
  if (!nodes) return undefined;
  return {
    nodes,
    ...(m[2] ? { username: decodeURIComponent(m[2]) } : {}),
    ...(m[3] !== undefined ? { password: decodeURIComponent(m[3]) } : {}),
    tls: m[1] === 'rediss',
  };
}

/** The seed nodes and credentials of a `redis+cluster://` URL; undefined for any other string. */
export function parseClusterUrl(url: string): ClusterUrl | undefined {
  const m = CLUSTER.exec(url);
  return m ? parsed(m) : undefined;
}

/** The sentinels, master name and credentials of a `redis+sentinel://` URL; undefined for any other string. */
export function parseSentinelUrl(url: string): SentinelUrl | undefined {
  const m = SENTINEL.exec(url);
  const base = m && parsed(m);
  return base ? { ...base, name: decodeURIComponent(m[5]) } : undefined;
}

/** A URL the Redis store accepts (config validation). */
export function isRedisUrl(url: string): boolean {
  if (parseClusterUrl(url) || parseSentinelUrl(url)) return true;
  if (!/^rediss?:\/\//.test(url)) return false;
  try {
    new URL(url);
    return true;
  } catch {
    return false;
  }
}

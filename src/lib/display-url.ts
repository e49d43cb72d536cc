import { parseClusterUrl, parseSentinelUrl } from './redis-url';

const hostPort = (n: { host: string; port: number }) => `${n.host.includes(':') ? `[${n.host}]` : n.host}:${n.port}`;

/**
 * A URL as it may be shown (log lines, the landing page): rebuilt from its scheme, hosts and path,
 * so no user, password, query or fragment can come along (an upstream or Redis URL may carry them,
 * and a password may hold any character). Reads the multi-host Redis forms too
 * (`redis+cluster://user:pw@h1:1,h2:2`, `redis+sentinel://…/name`), which `new URL` does not.
 */
export function displayUrl(url: string): string {
  const scheme = url.slice(0, url.indexOf('://') + 3);
  const sentinel = parseSentinelUrl(url);
  if (sentinel) return `${scheme}${sentinel.nodes.map(hostPort).join(',')}/${encodeURIComponent(sentinel.name)}`;
  const cluster = parseClusterUrl(url);
  if (cluster) return `${scheme}${cluster.nodes.map(hostPort).join(',')}`;
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.host}${u.pathname === '/' ? '' : u.pathname}`;
  } catch {
    return '(not shown)';
  }
}

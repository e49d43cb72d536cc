/** REDIS_URL forms: one server (redis://, rediss://), a Cluster's seed nodes (redis+cluster://), sentinels and a master name (redis+sentinel://). */
import { loadConfig } from '../../src/config';
import { isRedisUrl, parseClusterUrl, parseSentinelUrl } from '../../src/lib/redis-url';

test('redis+cluster:// names seed nodes, credentials and TLS', () => {
  expect(parseClusterUrl('redis+cluster://10.0.0.1:7000,10.0.0.2:7001')).toEqual({
    nodes: [
      { host: '10.0.0.1', port: 7000 },
      { host: '10.0.0.2', port: 7001 },
    ],
    tls: false,
  });
  expect(parseClusterUrl('rediss+cluster://app:p%40ss@redis-a:6379,[::1]:6380/')).toEqual({
    nodes: [
      { host: 'redis-a', port: 6379 },
      { host: '::1', port: 6380 },
    ],
    username: 'app',
    password: 'p@ss',
    tls: true,
  });
  expect(parseClusterUrl('redis+cluster://:secret@h:1')).toEqual({ nodes: [{ host: 'h', port: 1 }], password: 'secret', tls: false });
  for (const bad of [
    'redis://h:6379',
    'redis+cluster://',
    'redis+cluster://h',
    'redis+cluster://h:0',
    'redis+cluster://h:70000',
    'redis+cluster://h:1,',
    'redis+cluster://h:1/2',
  ]) {
    expect(parseClusterUrl(bad)).toBeUndefined();
  }
});

test('config takes one server or a Cluster, and refuses anything else naming the forms', () => {
  for (const ok of ['redis://127.0.0.1:6379', 'rediss://u:p@h:6380/2', 'redis+cluster://h1:7000,h2:7000'])
    expect(isRedisUrl(ok)).toBe(true);
  for (const bad of ['http://h:6379', 'redis+cluster://h1', 'h:6379']) expect(isRedisUrl(bad)).toBe(false);
  const secret = 'x'.repeat(32);
  expect(loadConfig({ env: { REDIS_URL: 'redis+cluster://h1:7000,h2:7000', GATEWAY_SECRET: secret } }).store.redisUrl).toBe(
    'redis+cluster://h1:7000,h2:7000',
  );
  expect(() => loadConfig({ env: { REDIS_URL: 'http://h:6379', GATEWAY_SECRET: secret } })).toThrow(/redis\+cluster:\/\//);
});

test('redis+sentinel:// names the sentinels, the master name, the primary’s credentials and TLS', () => {
  expect(parseSentinelUrl('redis+sentinel://10.0.0.1:26379,10.0.0.2:26379/gateway')).toEqual({
    nodes: [
      { host: '10.0.0.1', port: 26379 },
      { host: '10.0.0.2', port: 26379 },
    ],
    name: 'gateway',
    tls: false,
  });
  expect(parseSentinelUrl('rediss+sentinel://app:p%40ss@[::1]:26379/my%20primary')).toEqual({
    nodes: [{ host: '::1', port: 26379 }],
    username: 'app',
    password: 'p@ss',
    name: 'my primary',
    tls: true,
  });
  for (const bad of [
    'redis+sentinel://h:26379',
    'redis+sentinel://h:26379/',
    'redis+sentinel://h/m',
    'redis+sentinel://h:1,/m',
    'redis+cluster://h:1/m',
    'redis+sentinel://h:1/a/b',
  ]) {
    expect(parseSentinelUrl(bad)).toBeUndefined();
  }
  expect(isRedisUrl('redis+sentinel://h1:26379,h2:26379/gw')).toBe(true);
  expect(isRedisUrl('redis+sentinel://h1:26379')).toBe(false);
});

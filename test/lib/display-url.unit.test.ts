/** URLs as shown in log lines and on the landing page: scheme, hosts and path only. */
import { displayUrl } from '../../src/lib/display-url';

test.each([
  ['http://127.0.0.1:8081', 'http://127.0.0.1:8081'],
  ['https://api.example/v1?key=abc', 'https://api.example/v1'],
  ['https://u:hunter2-pass@api.example.com/base?key=hunter2-pass#x', 'https://api.example.com/base'],
  ['redis+cluster://:pa?ss#w@h1:7000,h2:7001', 'redis+cluster://h1:7000,h2:7001'],
  ['::', '(not shown)'],
  ['redis://:s3cret@redis.internal:6379/0', 'redis://redis.internal:6379/0'],
  ['rediss://user:pw@r:6380', 'rediss://r:6380'],
  ['redis+cluster://user:pw@h1:7000,h2:7001', 'redis+cluster://h1:7000,h2:7001'],
  ['redis+sentinel://:pw@s1:26379,s2:26379/mymaster', 'redis+sentinel://s1:26379,s2:26379/mymaster'],
  ['https://host/path@not-userinfo', 'https://host/path@not-userinfo'],
])('%s → %s', (url, shown) => {
  expect(displayUrl(url)).toBe(shown);
});

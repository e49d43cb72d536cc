import { Histogram, Registry } from 'prom-client';
import { BucketHistogram } from '../../../src/gateway/telemetry/bucket-histogram';
import { jsonInner } from '../../../src/gateway/telemetry/http';

const BUCKETS = [0.001, 0.01, 0.1, 1];
const OBSERVED: [string, string, number][] = [
  ['GET', '/v1beta/models', 0.0004],
  ['GET', '/v1beta/models', 0.001], // on a bound: counted in that bucket (le is inclusive)
  ['GET', '/v1beta/models', 0.05],
  ['POST', '/v1beta/chat/completions', 0.2],
  ['POST', '/v1beta/chat/completions', 7], // past the last bound: only +Inf
  ['GET', '/v1beta/models', 0.0099],
];

function both() {
  const ours = new Registry();
  const theirs = new Registry();
  const h = new BucketHistogram('t_seconds', 'help text', ['method', 'route'], BUCKETS, ours);
  const p = new Histogram({ name: 't_seconds', help: 'help text', labelNames: ['method', 'route'], buckets: BUCKETS, registers: [theirs] });
  return { ours, theirs, h, p };
}

describe('BucketHistogram', () => {
  test('scrapes to the same text and JSON as prom-client’s Histogram for the same observations', async () => {
    const { ours, theirs, h, p } = both();
    const children = new Map<string, ReturnType<typeof h.labels>>();
    for (const [method, route, v] of OBSERVED) {
      const key = `${method} ${route}`;
      if (!children.has(key)) children.set(key, h.labels(method, route));
      children.get(key)!.observe(v);
      p.labels(method, route).observe(v);
    }
    expect(await ours.metrics()).toBe(await theirs.metrics());
    // prom-client's JSON also carries an always-empty `exemplar` (exemplars are off): the rest is equal.
    const noExemplars = (json: Awaited<ReturnType<Registry['getMetricsAsJSON']>>) =>
      json.map((m) => ({ ...m, values: m.values.map((v) => ({ ...v, exemplar: undefined })) }));
    expect(noExemplars(await ours.getMetricsAsJSON())).toEqual(noExemplars(await theirs.getMetricsAsJSON()));
    expect(await ours.metrics()).toMatch(/^t_seconds_bucket\{le="0\.01",method="GET",route="\/v1beta\/models"\} 3$/m);
    expect(await ours.metrics()).toMatch(/^t_seconds_count\{method="POST",route="\/v1beta\/chat\/completions"\} 2$/m);
  });

  test('one series per label combination however many children are taken; reset empties it', async () => {
    const { ours, h } = both();
    h.labels('GET', '/a').observe(0.5);
    h.labels('GET', '/a').observe(0.5);
    expect(await ours.metrics()).toMatch(/^t_seconds_count\{method="GET",route="\/a"\} 2$/m);
    ours.resetMetrics();
    expect(await ours.metrics()).not.toMatch(/t_seconds_count/);
  });

  test('a wrong number of label values throws; a non-finite value is not recorded', async () => {
    const { ours, h } = both();
    expect(() => h.labels('GET')).toThrow(/label values/);
    const c = h.labels('GET', '/a');
    c.observe(Number.NaN);
    c.observe(Number.POSITIVE_INFINITY);
    c.observe(0.002);
    expect(await ours.metrics()).toMatch(/^t_seconds_sum\{method="GET",route="\/a"\} 0\.002$/m);
    expect(await ours.metrics()).toMatch(/^t_seconds_count\{method="GET",route="\/a"\} 1$/m);
  });
});

describe('jsonInner (the access line’s string escaping)', () => {
  test('gives exactly what JSON.stringify gives between the quotes, for plain and hostile strings', () => {
    const samples = ['/v1beta/models', 'GET', '127.0.0.1', '::ffff:10.0.0.1', 'tab\there', 'nul\u0000x\u001f', 'q"uote', 'back\\slash', 'é ü 中', '😀 pair', 'lone \ud800 high', 'lone \udc00 low', ''];
    for (const s of samples) expect(jsonInner(s)).toBe(JSON.stringify(s).slice(1, -1));
  });
});

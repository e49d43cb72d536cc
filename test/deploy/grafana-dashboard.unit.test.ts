/**
 * The Grafana dashboard (deploy/grafana/legacy-gateway.json) as Grafana imports it: the panels an
 * operator needs, laid out without overlap on the 24-column grid, each query on the dashboard's
 * data-source variable and filtered by its job variable. The live suite
 * (prometheus-live.test.ts) runs every query against a real Prometheus.
 */
import { dashboard } from './deploy-files';

const d = dashboard();
const panels = d.panels.filter((p) => p.type !== 'row');

test('the panels operators need are there', () => {
  const titles = panels.map((p) => p.title);
  for (const wanted of [
    'Live legacy streams',
    'Results per second',
    'Tick lateness',
    'Replicas',
    'Owned streams by replica',
    'Failovers and handovers',
    'Draining: connections held',
    'Store latency p99 by operation',
    'Store errors by operation',
    'Passthrough rate by outcome',
    'Passthrough latency p99',
    'Passthrough errors',
    'API keys by migration status',
    'Media worker memory by replica',
    'Media worker restarts by reason',
  ])
    expect(titles).toContain(wanted);
});

test('ids unique, panels inside the 24-column grid and not overlapping', () => {
  const ids = d.panels.map((p) => p.id);
  expect(new Set(ids).size).toBe(ids.length);
  const cells = new Map<string, string>();
  const problems: string[] = [];
  for (const p of d.panels) {
    const { x, y, w, h } = p.gridPos;
    if (!(x >= 0 && w > 0 && x + w <= 24 && h > 0)) problems.push(`${p.title}: outside the grid`);
    for (let i = x; i < x + w; i++)
      for (let j = y; j < y + h; j++) {
        const taken = cells.get(`${i},${j}`);
        if (taken) problems.push(`${p.title} overlaps ${taken} at ${i},${j}`);
        cells.set(`${i},${j}`, p.title);
      }
  }
  expect(problems).toEqual([]);
});

test('every query uses the data-source variable and the job filter', () => {
  const vars = d.templating.list.map((v) => [v.name, v.type]);
  expect(vars).toEqual(
    expect.arrayContaining([
      ['datasource', 'datasource'],
      ['job', 'query'],
    ]),
  );
  for (const p of panels) {
    expect([p.title, p.datasource]).toEqual([p.title, { type: 'prometheus', uid: '${datasource}' }]);
    expect(p.targets?.length).toBeGreaterThan(0);
    const refIds = p.targets!.map((t) => t.refId);
    expect(new Set(refIds).size).toBe(refIds.length);
    for (const t of p.targets!) {
      // Every series selector in the query is narrowed to the chosen job(s).
      const selectors = t.expr.match(/[a-z_:]+\{[^}]*\}/g) ?? [];
      expect([p.title, selectors.length]).not.toEqual([p.title, 0]);
      for (const s of selectors) expect([p.title, s]).toEqual([p.title, expect.stringContaining('job=~"$job"')]);
    }
  }
});

/**
 * Readers of the operator's kit in deploy/ that the suites here share: the Prometheus rule files,
 * the Grafana dashboard's queries (its variables replaced by what Prometheus itself accepts) and
 * the metric names a PromQL expression reads.
 */
import fs from 'node:fs';
import path from 'node:path';
import { parse, parseAllDocuments } from 'yaml';

export const ROOT = path.resolve(__dirname, '..', '..');
export const DEPLOY = path.join(ROOT, 'deploy');
export const PROMETHEUS_DIR = path.join(DEPLOY, 'prometheus');
export const DASHBOARD_FILE = path.join(DEPLOY, 'grafana', 'legacy-gateway.json');
export const KUBERNETES_DIR = path.join(DEPLOY, 'kubernetes');

export interface Rule {
  alert?: string;
  record?: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

/** The rule files Prometheus loads (deploy/prometheus/*.yml; the unit tests live in tests/). */
export function ruleFiles(): string[] {
  return fs
    .readdirSync(PROMETHEUS_DIR)
    .filter((f) => f.endsWith('.yml'))
    .map((f) => path.join(PROMETHEUS_DIR, f));
}

export function rules(): Rule[] {
  return ruleFiles().flatMap((f) => (parse(fs.readFileSync(f, 'utf8')) as { groups: { rules: Rule[] }[] }).groups.flatMap((g) => g.rules));
}

export const alerts = () => rules().filter((r) => r.alert);
export const recordedNames = () => new Set(rules().flatMap((r) => (r.record ? [r.record] : [])));

export interface DashboardPanel {
  id: number;
  type: string;
  title: string;
  gridPos: { x: number; y: number; w: number; h: number };
  datasource?: { type: string; uid: string };
  targets?: { refId: string; expr: string; datasource?: { type: string; uid: string } }[];
}

export interface Dashboard {
  uid: string;
  title: string;
  panels: DashboardPanel[];
  templating: { list: { name: string; type: string }[] };
}

export function dashboard(): Dashboard {
  return JSON.parse(fs.readFileSync(DASHBOARD_FILE, 'utf8')) as Dashboard;
}

/**
 * A dashboard query as Prometheus receives it from Grafana: `$job` (a regex, `.+` for All) and
 * `$__rate_interval` (at least four scrape intervals) replaced.
 */
export function asQuery(expr: string, job = '.+', rateInterval = '1m'): string {
  return expr.replaceAll('$__rate_interval', rateInterval).replaceAll('$job', job);
}

/** Every panel query of the dashboard with the panel it belongs to. */
export function dashboardQueries(): { panel: string; expr: string }[] {
  return dashboard().panels.flatMap((p) => (p.targets ?? []).map((t) => ({ panel: p.title, expr: t.expr })));
}

const FUNCTIONS_AND_KEYWORDS = new Set([
  'sum',
  'min',
  'max',
  'avg',
  'count',
  'by',
  'without',
  'on',
  'ignoring',
  'group_left',
  'group_right',
  'and',
  'or',
  'unless',
  'bool',
  'rate',
  'increase',
  'irate',
  'delta',
  'histogram_quantile',
  'time',
  'vector',
  'scalar',
  'abs',
  'clamp_min',
  'clamp_max',
  'offset',
  'max_over_time',
  'min_over_time',
  'avg_over_time',
  'label_replace',
  'absent',
  'topk',
  'bottomk',
  'quantile',
]);

/**
 * The metric names a PromQL expression reads: identifiers outside strings, label matchers,
 * grouping clauses and range brackets, that are neither functions nor keywords. Enough for the
 * expressions shipped here (the live suite proves each against a real Prometheus anyway).
 */
export function metricNames(expr: string): string[] {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'/g, '""') // strings
    .replace(/\{[^}]*\}/g, ' ') // label matchers
    .replace(/\[[^\]]*\]/g, ' ') // ranges
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' '); // label lists
  const names = new Set<string>();
  for (const m of bare.matchAll(/[A-Za-z_:][A-Za-z0-9_:]*/g)) {
    const name = m[0];
    const after = bare.slice(m.index + name.length).trimStart();
    if (FUNCTIONS_AND_KEYWORDS.has(name) || after.startsWith('(')) continue;
    names.add(name);
  }
  return [...names];
}

/** Kubernetes objects of one manifest file (a file may hold several documents). */
export function manifests(file: string): Record<string, unknown>[] {
  return parseAllDocuments(fs.readFileSync(file, 'utf8'))
    .map((d) => d.toJS() as Record<string, unknown> | null)
    .filter((d): d is Record<string, unknown> => d !== null);
}

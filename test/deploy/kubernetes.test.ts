/**
 * The Kubernetes manifests (deploy/kubernetes): every object valid against the Kubernetes API
 * schemas (kubernetes-models' validators; the ServiceMonitor against the Prometheus Operator's),
 * the kustomization listing exactly the files there, and the objects agreeing with each other and
 * with the gateway: the configuration the Deployment's environment gives (on the image's
 * NODE_ENV=production) boots, its ports and probe paths are the ones that gateway serves, and the
 * termination grace period outlasts the drain deadline plus the readiness delay.
 */
import fs from 'node:fs';
import path from 'node:path';
import { ServiceMonitor } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/ServiceMonitor';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { Service } from 'kubernetes-models/v1/Service';
import type { IContainer } from 'kubernetes-models/v1/Container';
import { parse } from 'yaml';
import { bootChecks } from '../../src/boot-checks';
import { loadConfig } from '../../src/config';
import { tracingSettings } from '../../src/lib/tracing';
import type { Config } from '../../src/config';
import { useStack } from '../helpers/stack';
import { KUBERNETES_DIR, ROOT, manifests } from './deploy-files';

/** The validating model of each kind shipped (apiVersion/kind → class). */
const MODELS: Record<string, new (data: never) => { validate(): void }> = {
  'v1/ConfigMap': ConfigMap,
  'v1/Service': Service,
  'apps/v1/Deployment': Deployment,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget,
  'autoscaling/v2/HorizontalPodAutoscaler': HorizontalPodAutoscaler,
  'monitoring.coreos.com/v1/ServiceMonitor': ServiceMonitor,
};

interface Obj {
  apiVersion: string;
  kind: string;
  metadata: { name: string; labels?: Record<string, string> };
  spec?: Record<string, unknown>;
  data?: Record<string, string>;
}

const files = fs.readdirSync(KUBERNETES_DIR).filter((f) => /\.ya?ml$/.test(f));
const objects = files
  .filter((f) => f !== 'kustomization.yaml')
  .flatMap((f) => manifests(path.join(KUBERNETES_DIR, f)).map((o) => ({ file: f, obj: o as unknown as Obj })));
const one = <T = Obj>(kind: string): T => {
  const found = objects.filter((o) => o.obj.kind === kind);
  expect(found).toHaveLength(1);
  return found[0]!.obj as T;
};

test('every object is valid against the Kubernetes (or Prometheus Operator) schema of its kind', () => {
  expect(objects.map((o) => o.obj.kind).sort()).toEqual(
    ['ConfigMap', 'Deployment', 'HorizontalPodAutoscaler', 'PodDisruptionBudget', 'Service', 'ServiceMonitor'].sort(),
  );
  for (const { file, obj } of objects) {
    const Model = MODELS[`${obj.apiVersion}/${obj.kind}`];
    expect([file, Model ? 'known' : `no schema for ${obj.apiVersion} ${obj.kind}`]).toEqual([file, 'known']);
    expect(() => new Model!(obj as never).validate()).not.toThrow();
  }
});

test('the validators reject what the API server would (the check can fail)', () => {
  const d = structuredClone(one('Deployment')) as unknown as {
    spec: { template: { spec: { containers: { ports: { containerPort: unknown }[] }[] } } };
  };
  d.spec.template.spec.containers[0]!.ports[0]!.containerPort = '8080';
  expect(() => new Deployment(d as never).validate()).toThrow(/containerPort must be integer/);
  const sm = structuredClone(one('ServiceMonitor')) as unknown as { spec: { endpoints: { interval: string }[] } };
  sm.spec.endpoints[0]!.interval = '15 seconds';
  expect(() => new ServiceMonitor(sm as never).validate()).toThrow(/interval/);
});

test('the kustomization lists exactly the manifests in the folder', () => {
  const k = parse(fs.readFileSync(path.join(KUBERNETES_DIR, 'kustomization.yaml'), 'utf8')) as { kind: string; resources: string[] };
  expect(k.kind).toBe('Kustomization');
  expect([...k.resources].sort()).toEqual(files.filter((f) => f !== 'kustomization.yaml').sort());
});

interface PodSpec {
  terminationGracePeriodSeconds: number;
  containers: IContainer[];
}

const deployment = () =>
  one<{
    metadata: { name: string };
    spec: { selector: { matchLabels: Record<string, string> }; template: { metadata: { labels: Record<string, string> }; spec: PodSpec } };
  }>('Deployment');
const container = () => deployment().spec.template.spec.containers[0]!;

/** The image's environment (Dockerfile `ENV` lines of the last stage). */
function imageEnv(): Record<string, string> {
  const stages = fs.readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8').split(/^FROM /m);
  return Object.fromEntries([...stages[stages.length - 1]!.matchAll(/^ENV (\w+)=(\S+)/gm)].map((m) => [m[1]!, m[2]!]));
}

/**
 * The environment a replica's process gets: the image's, the ConfigMap's, the literal values, and
 * stand-ins for what Kubernetes fills in (Secret values, the pod name).
 */
function podEnv(): Record<string, string> {
  const c = container();
  const env: Record<string, string> = { ...imageEnv() };
  for (const from of c.envFrom ?? []) {
    const cm = one('ConfigMap');
    expect(from.configMapRef?.name).toBe(cm.metadata.name);
    Object.assign(env, cm.data);
  }
  const standIns: Record<string, string> = {
    'redis-url': 'redis://redis:6379',
    'gateway-secret': 's'.repeat(32),
    'admin-token': 't'.repeat(24),
  };
  for (const e of c.env ?? []) {
    if (e.value !== undefined) env[e.name] = e.value;
    else if (e.valueFrom?.secretKeyRef) env[e.name] = standIns[e.valueFrom.secretKeyRef.key]!;
    else if (e.valueFrom?.fieldRef) env[e.name] = 'legacy-gateway-7d9f-abcde';
  }
  return env;
}

function replicaConfig(): Config {
  return loadConfig({ env: podEnv() });
}

test('GATEWAY_SECRET and REDIS_URL come from a Secret; the configuration they make boots in production', () => {
  const env = container().env ?? [];
  for (const name of ['GATEWAY_SECRET', 'REDIS_URL']) {
    const e = env.find((x) => x.name === name);
    expect([name, e?.valueFrom?.secretKeyRef?.name]).toEqual([name, 'legacy-gateway']);
    expect(e?.value).toBeUndefined();
  }
  expect(podEnv().NODE_ENV).toBe('production');
  const cfg = replicaConfig();
  expect(bootChecks(cfg, podEnv()).refuse).toBeUndefined();
  expect(cfg.store.redisUrl).toBeDefined();
  expect(cfg.store.gatewayId).toBe('legacy-gateway-7d9f-abcde');
});

test('the replicas send their traces to the collector over OTLP/HTTP, 1 % of new traces sampled', () => {
  expect(tracingSettings(podEnv())).toEqual({
    enabled: true,
    protocol: 'http/protobuf',
    endpoint: 'http://otel-collector:4318/v1/traces',
    sampler: 'parentbased_traceidratio 0.01',
  });
  // The pod's own names as resource attributes; the variables they use come earlier in the list (Kubernetes expands only those).
  const names = (container().env ?? []).map((e) => e.name);
  const attrs = (container().env ?? []).find((e) => e.name === 'OTEL_RESOURCE_ATTRIBUTES')!.value!;
  for (const [, ref] of attrs.matchAll(/\$\((\w+)\)/g)) expect(names.indexOf(ref!)).toBeLessThan(names.indexOf('OTEL_RESOURCE_ATTRIBUTES'));
});

test("ports and probes are the gateway's: http on its port with /readyz and /healthz, metrics on its metrics port", () => {
  const cfg = replicaConfig();
  const c = container();
  const port = (name: string) => c.ports?.find((p) => p.name === name)?.containerPort;
  expect(port('http')).toBe(cfg.port);
  expect(port('metrics')).toBe(cfg.telemetry.metricsPort);
  expect(c.readinessProbe?.httpGet).toEqual({ path: '/readyz', port: 'http' });
  expect(c.livenessProbe?.httpGet).toEqual({ path: '/healthz', port: 'http' });
  expect(c.startupProbe?.httpGet).toEqual({ path: '/healthz', port: 'http' });
  expect(c.args).toEqual(['serve']);
});

describe('the probe paths answer on a running gateway', () => {
  const stack = useStack({ telemetry: { metricsPort: 0 } });
  test('/readyz and /healthz 200 on the public port, /metrics on the metrics port only', async () => {
    const base = stack().url;
    for (const probe of [container().readinessProbe!, container().livenessProbe!])
      expect((await fetch(`${base}${probe.httpGet!.path}`)).status).toBe(200);
    expect((await fetch(`${base}/metrics`)).status).toBe(404);
    expect((await fetch(`${stack().gateway.metricsUrl}/metrics`)).status).toBe(200);
  });
});

test('the termination grace period outlasts the drain deadline plus the readiness delay and the shutdown grace', () => {
  const cfg = replicaConfig();
  const graceMs = deployment().spec.template.spec.terminationGracePeriodSeconds * 1000;
  expect(cfg.shutdownDelayMs).toBe(5000); // production default
  expect(graceMs).toBeGreaterThan(cfg.server.drainTimeoutMs + cfg.shutdownDelayMs);
  expect(graceMs).toBeGreaterThan(cfg.shutdownGraceMs);
  // The manifest states the drain deadline it was sized for, and it is the gateway's default.
  expect(cfg.server.drainTimeoutMs).toBe(loadConfig({ env: {} }).server.drainTimeoutMs);
  expect(loadConfig({ env: { DRAIN_TIMEOUT_MS: '120000' } }).server.drainTimeoutMs).toBe(120_000);
});

test('resources are requested; the image is this version', () => {
  const c = container();
  expect(c.resources?.requests).toEqual({ cpu: expect.anything(), memory: expect.anything() });
  expect(c.resources?.limits?.memory).toBeDefined();
  const version = (JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;
  expect(c.image).toBe(`legacy-gateway:${version}`);
});

test('Service, PodDisruptionBudget, HPA and ServiceMonitor point at the Deployment and at each other', () => {
  const d = deployment();
  const podLabels = d.spec.template.metadata.labels;
  const matches = (selector: Record<string, string>, labels: Record<string, string>) =>
    Object.entries(selector).every(([k, v]) => labels[k] === v);
  expect(matches(d.spec.selector.matchLabels, podLabels)).toBe(true);

  const svc = one<{
    metadata: { labels: Record<string, string> };
    spec: { selector: Record<string, string>; ports: { name: string; targetPort: string }[] };
  }>('Service');
  expect(matches(svc.spec.selector, podLabels)).toBe(true);
  const containerPorts = new Set(container().ports!.map((p) => p.name));
  for (const p of svc.spec.ports) expect(containerPorts).toContain(p.targetPort);

  const pdb = one<{ spec: { selector: { matchLabels: Record<string, string> }; maxUnavailable: number } }>('PodDisruptionBudget');
  expect(matches(pdb.spec.selector.matchLabels, podLabels)).toBe(true);
  expect(pdb.spec.maxUnavailable).toBe(1);

  const hpa = one<{
    spec: { scaleTargetRef: { kind: string; name: string }; minReplicas: number; metrics: { resource?: { name: string } }[] };
  }>('HorizontalPodAutoscaler');
  expect(hpa.spec.scaleTargetRef).toMatchObject({ kind: 'Deployment', name: d.metadata.name });
  expect(hpa.spec.minReplicas).toBeGreaterThanOrEqual(2); // a failover needs a survivor
  expect(hpa.spec.metrics.map((m) => m.resource?.name)).toEqual(['cpu']);

  const sm = one<{ spec: { selector: { matchLabels: Record<string, string> }; endpoints: { port: string; path: string }[] } }>(
    'ServiceMonitor',
  );
  expect(matches(sm.spec.selector.matchLabels, svc.metadata.labels)).toBe(true);
  const ep = sm.spec.endpoints[0]!;
  expect(ep.path).toBe('/metrics');
  const svcPort = svc.spec.ports.find((p) => p.name === ep.port);
  expect(container().ports!.find((p) => p.name === svcPort?.targetPort)?.containerPort).toBe(replicaConfig().telemetry.metricsPort);
});

/**
 * The example fleet of compose.yaml and its tracing: every replica sends OTLP/HTTP to the
 * `otel-collector` service (the gateway's own reading of that environment says so), and the
 * collector's configuration (deploy/otel-collector.yaml) receives OTLP/HTTP where they send it.
 */
import fs from 'node:fs';
import path from 'node:path';
import { parse } from 'yaml';
import { tracingSettings } from '../../src/lib/tracing';
import { ROOT } from './deploy-files';

interface Service {
  environment?: Record<string, string>;
  depends_on?: Record<string, unknown>;
  volumes?: string[];
}

const compose = parse(fs.readFileSync(path.join(ROOT, 'compose.yaml'), 'utf8'), { merge: true }) as { services: Record<string, Service> };

test('every replica traces to the otel-collector service over OTLP/HTTP, which starts before it', () => {
  const replicas = Object.entries(compose.services).filter(([name]) => name.startsWith('gateway-'));
  expect(replicas.map(([name]) => name)).toEqual(['gateway-a', 'gateway-b', 'gateway-c']);
  for (const [name, svc] of replicas) {
    expect([name, tracingSettings(svc.environment ?? {})]).toEqual([
      name,
      { enabled: true, protocol: 'http/protobuf', endpoint: 'http://otel-collector:4318/v1/traces', sampler: 'parentbased_always_on' },
    ]);
    expect(svc.depends_on).toHaveProperty('otel-collector');
    // Each replica keeps its own id: the spans' gateway.replica_id and service.instance.id.
    expect(svc.environment?.GATEWAY_ID).toBe(name);
  }
});

test("the collector's configuration receives OTLP/HTTP on 4318 and exports every trace it receives", () => {
  const collector = compose.services['otel-collector']!;
  const mount = collector.volumes!.find((v) => v.endsWith(':/etc/otelcol/config.yaml:ro'))!;
  const cfg = parse(fs.readFileSync(path.join(ROOT, mount.split(':')[0]!), 'utf8')) as {
    receivers: { otlp: { protocols: { http: { endpoint: string } } } };
    exporters: Record<string, unknown>;
    processors: Record<string, unknown>;
    service: { pipelines: { traces: { receivers: string[]; processors: string[]; exporters: string[] } } };
  };
  expect(cfg.receivers.otlp.protocols.http.endpoint).toBe('0.0.0.0:4318');
  const traces = cfg.service.pipelines.traces;
  expect(traces.receivers).toEqual(['otlp']);
  for (const p of traces.processors) expect(cfg.processors).toHaveProperty(p);
  expect(traces.exporters.length).toBeGreaterThan(0);
  for (const e of traces.exporters) expect(cfg.exporters).toHaveProperty(e);
});

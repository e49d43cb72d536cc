/**
 * The operator's endpoints: liveness, readiness, Prometheus metrics (on the public app or an app of
 * its own), the migration guide (markdown or HTML) and the legacy OpenAPI document.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import express from 'express';
import type { Express } from 'express';
import type { Brand } from '../brand';
import type { Config } from '../config';
import type { Logger } from '../lib/logger';
import { requireBearer } from './admin';
import { deployedGuide } from './docs/guide';
import { guideHtml } from './docs/guide-html';
import { sendHtml, wantsHtml } from './docs/page';
import { detailErrorHandler } from './http';
import { legacyOpenApi } from './legacy';
import type { LifecycleView } from './lifecycle';
import type { Store } from './store/store';
import type { GatewayMetrics } from './telemetry/metrics';
import type { UpstreamHealth } from './telemetry/upstream-health';

/** The migration guide the default deprecation `Link` points at (same path from src/ and dist/). */
const MIGRATION_GUIDE = path.resolve(__dirname, '..', '..', 'docs', 'migration.md');

/** `/healthz` and `/v0.2/healthz` (the process answers) and `/readyz` (this replica can serve). */
export function mountHealth(
  app: Express,
  deps: {
    store: Pick<Store, 'ready'>;
    upstreamHealth: UpstreamHealth;
    /** Where this replica is on its way out: not `ready` once a shutdown began; `draining` in the drain alone. */
    lifecycle: Pick<LifecycleView, 'ready' | 'draining'>;
    yieldsToPeers(): boolean;
    /** The media worker's state (`failed`: it died too often and is not restarted: not ready). */
    mediaWorker?(): string;
  },
): void {
  // Also under the legacy base: the Python SDK calls its health check there (HEAD is served by GET).
  app.get(['/healthz', '/v0.2/healthz'], (_req, res) => {
    res.type('text/plain').send('ok');
  });
  // "This replica can serve": the store answers, no shutdown began, and it is not the one replica
  // cut from an upstream the others reach. The upstream's own health (last probe) is reported but
  // does not decide: an upstream outage must not empty the load balancer.
  app.get('/readyz', async (_req, res) => {
    const storeOk = await deps.store.ready().catch(() => false);
    const { ready, draining } = deps.lifecycle;
    const impaired = deps.yieldsToPeers();
    const media = deps.mediaWorker?.() ?? 'idle';
    res.status(storeOk && ready && !impaired && media !== 'failed' ? 200 : 503).json({
      store: storeOk,
      draining,
      upstream: deps.upstreamHealth.up ?? null,
      upstream_impaired: impaired,
      media_worker: media,
    });
  });
}

/**
 * `/metrics` (when enabled), behind the metrics token when one is set; on `app`, or on an app of
 * its own (returned) when `telemetry.metricsPort` moves it off the public port.
 */
export function mountMetrics(app: Express, telemetry: Config['telemetry'], metrics: GatewayMetrics, logger: Logger): Express | undefined {
  if (!telemetry.metrics) return undefined;
  const guard = telemetry.metricsToken
    ? [requireBearer(telemetry.metricsToken, 'metrics', 'Metrics need Authorization: Bearer <metrics token>')]
    : [];
  const own = telemetry.metricsPort === undefined ? undefined : express();
  (own ?? app).get('/metrics', ...guard, async (_req, res) => {
    res.type(metrics.contentType()).send(await metrics.text());
  });
  if (own) {
    own.disable('x-powered-by');
    own.use((_req, res) => void res.status(404).json({ detail: 'Only /metrics is served here' }));
    own.use(detailErrorHandler(logger));
  }
  return own;
}

export interface DocsDeps {
  brand: Brand;
  deprecation: Config['deprecation'];
  /** The gateway's public base URL (`publicUrl`): the guide's examples use it. */
  publicUrl?: string | undefined;
}

/** The guide in both forms, rendered once per process. */
interface ServedGuide {
  markdown: string;
  html: string;
}

/**
 * `/docs/migration`, the guide in this deployment's words (src/gateway/docs/guide.ts): HTML for a
 * browser, markdown for everyone else (`Accept`, or `?format=markdown|html`); and
 * `/v0.2/openapi.json`. Both are built once, on first ask.
 */
export function mountDocs(app: Express, deps: DocsDeps): void {
  const { brand, deprecation, publicUrl } = deps;
  let guide: Promise<ServedGuide | undefined> | undefined;
  const load = () =>
    (guide ??= fs.readFile(MIGRATION_GUIDE, 'utf8').then(
      (text) => {
        const markdown = deployedGuide(text, { brand, deprecation, publicUrl });
        return { markdown, html: guideHtml(markdown) };
      },
      () => undefined,
    ));
  app.get('/docs/migration', async (req, res) => {
    const format = req.query.format;
    if (format !== undefined && format !== 'markdown' && format !== 'html') {
      res.status(400).json({ detail: 'format must be markdown or html' });
      return;
    }
    res.vary('Accept');
    const served = await load();
    if (served === undefined) res.status(404).json({ detail: 'The migration guide is not installed on this gateway' });
    else if (format === 'html' || (format === undefined && wantsHtml(req, 'text/markdown'))) sendHtml(res, served.html);
    else res.type('text/markdown; charset=utf-8').send(served.markdown);
  });
  let openApi: string | undefined;
  app.get('/v0.2/openapi.json', (_req, res) => {
    openApi ??= JSON.stringify(legacyOpenApi(brand, deprecation));
    res.type('application/json').send(openApi);
  });
}

import { createHash, timingSafeEqual } from 'node:crypto';
import express from 'express';
import type { NextFunction, Request, Response, Router } from 'express';
import { detailError } from '../lib/errors';
import { bearerKey } from './http';
import { reportToCsv } from './telemetry/report-csv';
import { MIGRATION_STATUSES } from './telemetry/migration';
import type { MigrationStatus } from './telemetry/migration';
import type { DeprecationReport, DeprecationUsage, ReportOptions, ReportSort } from './telemetry/usage';
import { utcDay } from './telemetry/usage';

export interface AdminDeps {
  /** Admin bearer token; the router is not mounted without one (→ 404). */
  token: string;
  usage: DeprecationUsage;
  deprecation: DeprecationReport['deprecation'];
}

const digest = (s: string) => createHash('sha256').update(s).digest();

/** Constant-time comparison of a presented token with the configured one. */
export function tokenMatches(presented: string | undefined, expected: string): boolean {
  return presented !== undefined && timingSafeEqual(digest(presented), digest(expected));
}

/** 401 `{detail}` unless the request carries `Authorization: Bearer <token>`. */
export function requireBearer(token: string, realm: string, message: string) {
  return (req: Request, res: Response, next: NextFunction): void => {
    if (!tokenMatches(bearerKey(req), token)) {
      res.setHeader('www-authenticate', `Bearer realm="${realm}"`);
      throw detailError(401, 'unauthorized', message);
    }
    next();
  };
}

/**
 * `/admin/*`, behind the admin bearer token:
 * `GET /admin/deprecation` — who still uses /v0.2 and who is migrating (JSON; `?format=csv` for a
 * spreadsheet, one row per key hash; `?status=legacy-only,migrating`, `?sort=last_seen|requests|status|key_hash`,
 * `?order=asc|desc`).
 */
export function adminRouter(deps: AdminDeps): Router {
  const r = express.Router();
  r.use(requireBearer(deps.token, 'admin', 'Admin endpoints need Authorization: Bearer <admin token>'));

  r.get('/deprecation', async (req, res) => {
    const format = typeof req.query.format === 'string' ? req.query.format : 'json';
    if (format !== 'json' && format !== 'csv') throw detailError(400, 'bad_request', 'format must be json or csv');
    const opts = reportOptions(req.query);
    await deps.usage.flush();
    const report = await deps.usage.report(deps.deprecation, opts);
    res.setHeader('cache-control', 'no-store');
    if (format === 'json') {
      res.json(report);
      return;
    }
    res.setHeader('content-disposition', `attachment; filename="v0.2-usage-${utcDay(Date.parse(report.generated_at))}.csv"`);
    res.type('text/csv; charset=utf-8').send(reportToCsv(report));
  });

  return r;
}

const SORTS: readonly ReportSort[] = ['last_seen', 'requests', 'status', 'key_hash'];

/** `status`, `sort` and `order` query parameters; anything else in them is a 400 naming the choices. */
function reportOptions(query: Request['query']): ReportOptions {
  const one = (name: string): string | undefined => {
    const v = query[name];
    if (v === undefined) return undefined;
    if (typeof v !== 'string') throw detailError(400, 'bad_request', `${name} must be given once`);
    return v;
  };
  const opts: ReportOptions = {};
  const status = one('status');
  if (status !== undefined) {
    const list = status.split(',').map((s) => s.trim());
    const bad = list.find((s) => !(MIGRATION_STATUSES as readonly string[]).includes(s));
    if (bad !== undefined)
      throw detailError(400, 'bad_request', `status must be a comma-separated list of ${MIGRATION_STATUSES.join(', ')}`);
    opts.status = list as MigrationStatus[];
  }
  const sort = one('sort');
  if (sort !== undefined) {
    if (!(SORTS as readonly string[]).includes(sort)) throw detailError(400, 'bad_request', `sort must be one of ${SORTS.join(', ')}`);
    opts.sort = sort as ReportSort;
  }
  const order = one('order');
  if (order !== undefined) {
    if (order !== 'asc' && order !== 'desc') throw detailError(400, 'bad_request', 'order must be asc or desc');
    opts.order = order;
  }
  return opts;
}

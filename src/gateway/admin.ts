import { createHash, timingSafeEqual } from 'node:crypto';
import express from 'express';
import type { NextFunction, Request, Response, Router } from 'express';
import { detailError } from '../lib/errors';
import { bearerKey } from './http';
import { reportToCsv } from './telemetry/report-csv';
import type { DeprecationReport, DeprecationUsage } from './telemetry/usage';
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
 * `GET /admin/deprecation` — who still uses /v0.2 (JSON; `?format=csv` for a spreadsheet, one row
 * per key hash).
 */
export function adminRouter(deps: AdminDeps): Router {
  const r = express.Router();
  r.use(requireBearer(deps.token, 'admin', 'Admin endpoints need Authorization: Bearer <admin token>'));

  r.get('/deprecation', async (req, res) => {
    const format = typeof req.query.format === 'string' ? req.query.format : 'json';
    if (format !== 'json' && format !== 'csv') throw detailError(400, 'bad_request', 'format must be json or csv');
    await deps.usage.flush();
    const report = await deps.usage.report(deps.deprecation);
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

import type { NextFunction, Request, Response } from 'express';
import type { DeprecationConfig } from '../../config';

/** The three headers announcing the /v0.2 deprecation. */
export interface DeprecationHeaders {
  /** RFC 9745: `@<unix seconds>`. */
  deprecation: string;
  /** RFC 8594: an IMF-fixdate. */
  sunset: string;
  /** RFC 8288: `<url>; rel="deprecation"`. */
  link: string;
}

/** Renders the configured dates and link (config validation guarantees sunset ≥ date). */
export function deprecationHeaders(cfg: Pick<DeprecationConfig, 'date' | 'sunset' | 'link'>): DeprecationHeaders {
  return {
    deprecation: `@${Math.floor(Date.parse(cfg.date) / 1000)}`,
    // toUTCString is exactly the IMF-fixdate form: `Sun, 06 Nov 1994 08:49:37 GMT`.
    sunset: new Date(Date.parse(cfg.sunset)).toUTCString(),
    link: `<${cfg.link}>; rel="deprecation"`,
  };
}

/** Raw header lines for a WebSocket 101 response. */
export function deprecationHeaderLines(h: DeprecationHeaders): string[] {
  return [`Deprecation: ${h.deprecation}`, `Sunset: ${h.sunset}`, `Link: ${h.link}`];
}

/** Sets the headers on every response of the router it is mounted on (errors and 404s included). */
export function announceDeprecation(h: DeprecationHeaders) {
  return (_req: Request, res: Response, next: NextFunction): void => {
    res.setHeader('Deprecation', h.deprecation);
    res.setHeader('Sunset', h.sunset);
    res.append('Link', h.link);
    next();
  };
}

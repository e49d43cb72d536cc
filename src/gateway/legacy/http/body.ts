/**
 * The body of /v0.2 requests. JSON when the content type says so, and also when there is no content
 * type at all: the old service's framework read such a body as JSON, and clients built on it may
 * leave the header out. A body sent with another content type (curl's `-d` sends
 * `application/x-www-form-urlencoded`) is refused naming `content-type`: read as empty, it would
 * come back as "Field required" for fields the body does hold.
 */
import type { IncomingMessage } from 'node:http';
import express from 'express';
import type { RequestHandler } from 'express';
import { ServiceError } from '../../../lib/errors';

const JSON_TYPE = /^application\/(?:[\w.+-]*\+)?json\s*(?:;|$)/i;

function jsonOrUntyped(req: IncomingMessage): boolean {
  const type = req.headers['content-type'];
  return type === undefined || type.trim() === '' || JSON_TYPE.test(type);
}

/** A body is announced: a length above zero, or a chunked one. */
function announcesBody(req: IncomingMessage): boolean {
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

function wrongBodyType(type: string): ServiceError {
  const msg =
    `The request body must be JSON sent with content-type: application/json (got content-type: ${type}); ` +
    "with curl, add -H 'content-type: application/json'";
  return new ServiceError(400, 'invalid_body', msg, {
    shape: 'legacy',
    details: [{ loc: ['header', 'content-type'], msg, type: 'content_type' }],
  });
}

/** Parses a JSON (or untyped) body up to `limit`; refuses a body of any other type. */
export function legacyBody(limit = '1mb'): RequestHandler[] {
  const refuseOtherTypes: RequestHandler = (req, _res, next) => {
    if (!jsonOrUntyped(req) && announcesBody(req)) {
      // Drained, not read: the answer must not wait for (or choke on) a body it refuses.
      req.resume();
      next(wrongBodyType(String(req.headers['content-type'])));
      return;
    }
    next();
  };
  return [refuseOtherTypes, express.json({ limit, type: jsonOrUntyped })];
}

/** The token of an `Authorization: Bearer <token>` header value, or undefined. */
export function parseBearer(authorization: string | string[] | undefined): string | undefined {
  const m = typeof authorization === 'string' ? /^Bearer\s+(\S+)\s*$/i.exec(authorization) : null;
  return m?.[1];
}

/** Bearer token of a request, or undefined. */
export function bearerKey(req: { headers: Record<string, string | string[] | undefined> }): string | undefined {
  return parseBearer(req.headers.authorization);
}

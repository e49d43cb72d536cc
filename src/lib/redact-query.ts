/**
 * A URL as it may be logged or put in a span: parameter names kept, every value replaced (a
 * `?token=` probe, a key in a query, a signed URL, a room's `access_token` never reach a log line
 * or a trace); a parameter without `=` is all value.
 */
export function redactQuery(url: string): string {
  const q = url.indexOf('?');
  if (q < 0) return url;
  const h = url.indexOf('#', q);
  const query = url.slice(q + 1, h < 0 ? undefined : h);
  if (!query) return url.slice(0, q + 1);
  let out = '';
  for (const part of query.split('&')) {
    const eq = part.indexOf('=');
    out += `${out ? '&' : ''}${eq < 0 ? REDACTED : `${part.slice(0, eq)}=${REDACTED}`}`;
  }
  return `${url.slice(0, q)}?${out}`;
}

const REDACTED = '[redacted]';

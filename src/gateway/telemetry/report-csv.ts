import type { DeprecationReport, KeyUsage } from './usage';

/** `a=1; b=2`, sorted by name so rows diff cleanly day to day. */
const pairs = (m: Record<string, number>): string =>
  Object.entries(m)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([k, v]) => `${k}=${v}`)
    .join('; ');

const COLUMNS: [string, (k: KeyUsage) => string | number | null][] = [
  ['key_hash', (k) => k.key_hash],
  ['account_ids', (k) => k.account_ids.join(' ')],
  ['first_seen_at', (k) => k.first_seen_at],
  ['last_seen_at', (k) => k.last_seen_at],
  ['requests_total', (k) => k.requests_total],
  ['streams_total', (k) => k.streams.total],
  ['streams_native', (k) => k.streams.by_source.native ?? 0],
  ['streams_webrtc', (k) => k.streams.by_source.webrtc ?? 0],
  ['streams_room', (k) => k.streams.by_source.room ?? 0],
  ['streams_clip', (k) => k.streams.by_mode.clip ?? 0],
  ['streams_frame', (k) => k.streams.by_mode.frame ?? 0],
  ['deprecated_fields', (k) => pairs(k.deprecated_fields)],
  ['backends', (k) => pairs(k.backends)],
  ['models', (k) => pairs(k.models)],
  ['inferences_ok', (k) => k.inferences.ok],
  ['inferences_failed', (k) => k.inferences.failed],
  ['output_tokens', (k) => k.output_tokens],
  ['websocket_connections', (k) => k.websocket_connections],
  ['end_reasons', (k) => pairs(k.end_reasons)],
  ['requests_by_endpoint', (k) => pairs(k.requests)],
  ['migration_status', (k) => k.migration.status],
  ['legacy_daily', (k) => pairs(k.migration.legacy_daily)],
  ['v1beta_requests', (k) => k.migration.v1beta_requests],
  ['billing_requests', (k) => k.migration.billing_requests],
  ['last_passthrough_at', (k) => k.migration.last_passthrough_at],
  ['client_families_legacy', (k) => pairs(k.migration.client_families.legacy)],
  ['client_families_passthrough', (k) => pairs(k.migration.client_families.passthrough)],
  ['refused_brownout', (k) => k.migration.refused.brownout],
  ['refused_sunset', (k) => k.migration.refused.sunset],
];

/** RFC 4180 quoting, plus a guard against spreadsheet formula injection. */
function cell(v: string | number | null): string {
  if (v === null) return '';
  if (typeof v === 'number') return String(v);
  const safe = /^[=+\-@\t\r]/.test(v) ? `'${v}` : v;
  return /[",\r\n]/.test(safe) ? `"${safe.replaceAll('"', '""')}"` : safe;
}

/** One row per API key (hash), header first, CRLF line ends. */
export function reportToCsv(report: DeprecationReport): string {
  const lines = [COLUMNS.map(([name]) => name).join(',')];
  for (const k of report.keys) lines.push(COLUMNS.map(([, get]) => cell(get(k))).join(','));
  return `${lines.join('\r\n')}\r\n`;
}

/**
 * How a log line reads at a terminal (the pretty format): pino-pretty writes the time, level and
 * name, `prettyMessage` the rest, on one line: the message, then the line's own fields as
 * `key=value`. Except where a person reads a line as a whole:
 * - an access line: `POST /v0.2/streams 201 40ms`, then the error it answered with, the client
 *   address and the request id's first 8 characters;
 * - the boot lines (`gateway listening on …`, `emulator listening on …`): a summary, one topic a
 *   line;
 * - an error's stack, below its line.
 * Only for reading: JSON lines (for machines) carry every field as logged.
 */
import { isRecord } from './is-record';

type Fields = Record<string, unknown>;

/** Shown by pino-pretty's own head (time, level, name), or not at all. */
const HEAD = new Set(['level', 'time', 'pid', 'hostname', 'service', 'name']);

/** Continuation lines under a line's head. */
const INDENT = '    ';

/** pino-pretty's `messageFormat`: the text after a line's `[time] LEVEL (name):`. */
export function prettyMessage(log: Fields, messageKey: string): string {
  const msg = typeof log[messageKey] === 'string' ? log[messageKey] : '';
  if (isRecord(log.req) && isRecord(log.res) && typeof log.responseTime === 'number') return accessLine(log, msg);
  if (msg.startsWith('gateway listening on ') && 'embeddedEmulator' in log) return gatewayBoot(log);
  if (msg.startsWith('emulator listening on ') && 'region' in log) return emulatorBoot(log, msg);
  return plainLine(log, messageKey, msg);
}

/** C0 and C1 controls, DEL and the Unicode line breaks. */
const isControl = (c: number) => c < 0x20 || (c >= 0x7f && c <= 0x9f) || c === 0x2028 || c === 0x2029;

/** Control characters shown escaped: a client's text (a path, a stream id) cannot move the cursor or forge a line. */
function clean(text: string): string {
  let out = '';
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    out += isControl(c) ? `\\u${c.toString(16).padStart(4, '0')}` : text[i];
  }
  return out;
}

/** A value on one line: a plain word as it is, any other string quoted (JSON escapes), anything else as JSON. */
function inline(value: unknown): string {
  if (typeof value === 'string') return /^[^\s"=\\]+$/.test(value) && clean(value) === value ? value : clean(JSON.stringify(value));
  if (value === undefined) return 'undefined';
  return clean(JSON.stringify(value) ?? String(value));
}

/** An error's stack under its line, indented; nothing when it has none. */
function stackBelow(err: unknown): string {
  const stack = isRecord(err) && typeof err.stack === 'string' ? err.stack : undefined;
  return stack
    ? `\n${stack
        .split('\n')
        .map((l) => INDENT + clean(l))
        .join('\n')}`
    : '';
}

function plainLine(log: Fields, messageKey: string, msg: string): string {
  // A logged Error itself (`logger.error(err)`): pino-pretty writes its stack.
  const isError = log.type === 'Error' && typeof log.stack === 'string';
  const fields: string[] = [];
  for (const [k, v] of Object.entries(log)) {
    if (k === messageKey || HEAD.has(k)) continue;
    if (isError && (k === 'type' || k === 'stack')) continue;
    // What the message says already (`upstream probe: http://… reachable` and its `upstream`).
    if (typeof v === 'string' && v.length >= 4 && msg.includes(v)) continue;
    fields.push(`${k}=${k === 'err' && isRecord(v) && typeof v.message === 'string' ? inline(v.message) : inline(v)}`);
  }
  return [clean(msg), ...(fields.length ? [fields.join(' ')] : [])].join(' · ') + stackBelow(log.err);
}

function accessLine(log: Fields, msg: string): string {
  const req = log.req as Fields;
  const parts = [clean(msg)];
  const error = log.error;
  if (isRecord(error)) {
    const { code, ...more } = error;
    parts.push([inline(code), ...Object.entries(more).map(([k, v]) => `${k}=${inline(v)}`)].join(' '));
  }
  if (typeof req.remoteAddress === 'string') parts.push(clean(req.remoteAddress));
  if (typeof log.reqId === 'string' && log.reqId) parts.push(clean(log.reqId.slice(0, 8)));
  return parts.join(' · ') + stackBelow(log.err);
}

const str = (v: unknown): string => (typeof v === 'string' ? clean(v) : v === undefined || v === null ? '' : inline(v));
const onOff = (v: unknown) => (v === true ? 'on' : 'off');
/** `label   text`, the labels aligned. */
const row = (label: string, text: string) => `\n${INDENT}${label.padEnd(9)}${text}`;

function configRow(config: unknown): string {
  const c = isRecord(config) ? config : {};
  const files = Array.isArray(c.files) ? c.files.map(str) : [];
  const env = Array.isArray(c.env) ? c.env.map(str) : [];
  return row('config', `${files.join(' + ') || '(defaults only)'}${env.length ? ` + env ${env.join(', ')}` : ''}`);
}

function profileRow(brand: unknown): string {
  if (!isRecord(brand)) return '';
  const backends = Array.isArray(brand.backends) ? brand.backends.map(str) : [];
  return row(
    'profile',
    `${backends[0] ?? '?'}: keys ${str(brand.keyPrefix)}…, ${str(brand.scheme)}, ${str(brand.regionHeader)}, ` +
      `rooms ${str(brand.roomVendor)}, backends ${backends.join(' + ')}`,
  );
}

/** The gateway's boot line (src/main.ts `runServe`) as its summary. */
function gatewayBoot(log: Fields): string {
  const emu = isRecord(log.embeddedEmulator) ? log.embeddedEmulator : undefined;
  const upstream = emu
    ? `${str(log.upstream)} = embedded emulator (no UPSTREAM_URL; control API ${onOff(emu.controlApi)}, synthetic publisher ${onOff(emu.autoPublish)})`
    : str(log.upstream);
  const member = log.fleet === true ? 'fleet member' : 'solo';
  const store = `${log.storeUrl ? str(log.storeUrl) : str(log.store)}, ${member} (replica ${str(log.gatewayId)})`;
  const metrics = log.metrics ? (log.metricsUrl ? `${str(log.metricsUrl)}${str(log.metrics)}` : `${str(log.metrics)} on this port`) : 'off';
  const tracing = isRecord(log.tracing)
    ? `${str(log.tracing.protocol)} to ${str(log.tracing.endpoint)} (${str(log.tracing.sampler)})`
    : 'off';
  const d = isRecord(log.deprecation) ? log.deprecation : {};
  const b = isRecord(d.brownouts) ? d.brownouts : {};
  const brownouts = (Array.isArray(b.schedule) ? b.schedule.length : 0) + (Array.isArray(b.windows) ? b.windows.length : 0);
  const legacy =
    `lease ${str(log.legacyLeaseSeconds)} s · deprecated ${str(d.date)} · sunset ${str(d.sunset)} (then ${str(d.afterSunset)})` +
    (brownouts ? ` · ${brownouts} brownout entries` : '');
  return (
    `gateway listening on ${str(log.url)}` +
    row('upstream', upstream) +
    row('store', store) +
    row('metrics', `${metrics} · admin report ${log.adminReport ? str(log.adminReport) : 'off'} · tracing ${tracing}`) +
    profileRow(log.brand) +
    row('legacy', legacy) +
    configRow(log.config)
  );
}

/** The emulator's boot line (src/main.ts `runEmulator`) as its summary. */
function emulatorBoot(log: Fields, msg: string): string {
  return (
    clean(msg) +
    row('emulator', `control API ${onOff(log.controlApi)} · synthetic publisher ${onOff(log.autoPublish)}`) +
    profileRow(log.brand) +
    configRow(log.config)
  );
}

/**
 * A real OTLP/HTTP trace receiver on loopback (`POST /v1/traces`): `http/json` bodies parsed as
 * JSON, `http/protobuf` bodies decoded by a small reader of the OTLP trace messages (the OTel JS
 * packages ship an encoder but no public request decoder). Every span comes out flat, with its
 * resource's attributes, in the order received.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  /** '' for a root span. */
  parentSpanId: string;
  name: string;
  /** OTLP SpanKind: 1 internal, 2 server, 3 client. */
  kind: number;
  startMs: number;
  endMs: number;
  attributes: Record<string, unknown>;
  links: { traceId: string; spanId: string; attributes: Record<string, unknown> }[];
  /** Status code: 0 unset, 1 ok, 2 error. */
  status: { code: number; message?: string };
  resource: Record<string, unknown>;
  /** How it arrived. */
  protocol: 'json' | 'protobuf';
}

export interface OtlpReceiver {
  /** Base URL (`OTEL_EXPORTER_OTLP_ENDPOINT`). */
  url: string;
  spans: ReceivedSpan[];
  /** Export requests answered, by content type. */
  requests: { json: number; protobuf: number };
  close(): Promise<void>;
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const requests = { json: 0, protobuf: 0 };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.method !== 'POST' || req.url !== '/v1/traces') {
        res.writeHead(404).end();
        return;
      }
      const body = Buffer.concat(chunks);
      const type = req.headers['content-type'] ?? '';
      try {
        if (type.startsWith('application/json')) {
          spans.push(...fromJson(JSON.parse(body.toString('utf8')) as JsonRequest));
          requests.json++;
          res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
        } else if (type.startsWith('application/x-protobuf')) {
          spans.push(...fromProtobuf(body));
          requests.protobuf++;
          // An empty ExportTraceServiceResponse.
          res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
        } else res.writeHead(415).end();
      } catch (err) {
        res.writeHead(400).end(String(err));
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    spans,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

// ── http/json ──

type JsonValue = {
  stringValue?: string;
  boolValue?: boolean;
  intValue?: number | string;
  doubleValue?: number;
  arrayValue?: { values?: JsonValue[] };
};
type JsonKv = { key: string; value: JsonValue };
interface JsonSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  startTimeUnixNano: string | number;
  endTimeUnixNano: string | number;
  attributes?: JsonKv[];
  links?: { traceId: string; spanId: string; attributes?: JsonKv[] }[];
  status?: { code?: number; message?: string };
}
interface JsonRequest {
  resourceSpans: { resource?: { attributes?: JsonKv[] }; scopeSpans: { spans: JsonSpan[] }[] }[];
}

/** OTLP/JSON ids are hex; a base64 one (protobuf-JSON mapping) is turned into hex. */
const hexId = (id: string | undefined) =>
  !id ? '' : /^[0-9a-f]+$/i.test(id) ? id.toLowerCase() : Buffer.from(id, 'base64').toString('hex');

function jsonValue(v: JsonValue): unknown {
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.boolValue !== undefined) return v.boolValue;
  if (v.intValue !== undefined) return Number(v.intValue);
  if (v.doubleValue !== undefined) return v.doubleValue;
  if (v.arrayValue) return (v.arrayValue.values ?? []).map(jsonValue);
  return undefined;
}

const jsonAttrs = (kvs: JsonKv[] | undefined) => Object.fromEntries((kvs ?? []).map((kv) => [kv.key, jsonValue(kv.value)]));

function fromJson(req: JsonRequest): ReceivedSpan[] {
  return req.resourceSpans.flatMap((rs) => {
    const resource = jsonAttrs(rs.resource?.attributes);
    return rs.scopeSpans.flatMap((ss) =>
      ss.spans.map((s) => ({
        traceId: hexId(s.traceId),
        spanId: hexId(s.spanId),
        parentSpanId: hexId(s.parentSpanId),
        name: s.name,
        kind: s.kind,
        startMs: Number(BigInt(s.startTimeUnixNano) / 1000n) / 1000,
        endMs: Number(BigInt(s.endTimeUnixNano) / 1000n) / 1000,
        attributes: jsonAttrs(s.attributes),
        links: (s.links ?? []).map((l) => ({ traceId: hexId(l.traceId), spanId: hexId(l.spanId), attributes: jsonAttrs(l.attributes) })),
        status: { code: s.status?.code ?? 0, message: s.status?.message },
        resource,
        protocol: 'json' as const,
      })),
    );
  });
}

// ── http/protobuf: opentelemetry/proto/collector/trace/v1 ExportTraceServiceRequest, the fields read here ──

class Reader {
  pos = 0;
  constructor(private readonly buf: Buffer) {}

  get done(): boolean {
    return this.pos >= this.buf.length;
  }

  varint(): bigint {
    let out = 0n;
    let shift = 0n;
    for (;;) {
      const b = this.buf[this.pos++];
      if (b === undefined) throw new Error('truncated varint');
      out |= BigInt(b & 0x7f) << shift;
      if (b < 0x80) return out;
      shift += 7n;
    }
  }

  tag(): { field: number; wire: number } {
    const t = Number(this.varint());
    return { field: t >>> 3, wire: t & 7 };
  }

  bytes(): Buffer {
    const n = Number(this.varint());
    const out = this.buf.subarray(this.pos, this.pos + n);
    this.pos += n;
    return out;
  }

  fixed64(): bigint {
    const v = this.buf.readBigUInt64LE(this.pos);
    this.pos += 8;
    return v;
  }

  double(): number {
    const v = this.buf.readDoubleLE(this.pos);
    this.pos += 8;
    return v;
  }

  skip(wire: number): void {
    if (wire === 0) this.varint();
    else if (wire === 1) this.pos += 8;
    else if (wire === 2) this.bytes();
    else if (wire === 5) this.pos += 4;
    else throw new Error(`wire type ${wire}`);
  }
}

/** Each field of a message: `on(field, wire, reader)` reads it or returns false to skip it. */
function fields(buf: Buffer, on: (field: number, wire: number, r: Reader) => boolean): void {
  const r = new Reader(buf);
  while (!r.done) {
    const { field, wire } = r.tag();
    if (!on(field, wire, r)) r.skip(wire);
  }
}

function anyValue(buf: Buffer): unknown {
  let out: unknown;
  fields(buf, (f, w, r) => {
    if (f === 1 && w === 2) out = r.bytes().toString('utf8');
    else if (f === 2 && w === 0) out = r.varint() !== 0n;
    else if (f === 3 && w === 0) out = Number(BigInt.asIntN(64, r.varint()));
    else if (f === 4 && w === 1) out = r.double();
    else if (f === 5 && w === 2) {
      const values: unknown[] = [];
      fields(r.bytes(), (f2, w2, r2) => (f2 === 1 && w2 === 2 ? (values.push(anyValue(r2.bytes())), true) : false));
      out = values;
    } else return false;
    return true;
  });
  return out;
}

function keyValue(buf: Buffer): [string, unknown] {
  let key = '';
  let value: unknown;
  fields(buf, (f, w, r) => {
    if (f === 1 && w === 2) key = r.bytes().toString('utf8');
    else if (f === 2 && w === 2) value = anyValue(r.bytes());
    else return false;
    return true;
  });
  return [key, value];
}

function span(buf: Buffer, resource: Record<string, unknown>): ReceivedSpan {
  const s: ReceivedSpan = {
    traceId: '',
    spanId: '',
    parentSpanId: '',
    name: '',
    kind: 0,
    startMs: 0,
    endMs: 0,
    attributes: {},
    links: [],
    status: { code: 0 },
    resource,
    protocol: 'protobuf',
  };
  fields(buf, (f, w, r) => {
    if (f === 1 && w === 2) s.traceId = r.bytes().toString('hex');
    else if (f === 2 && w === 2) s.spanId = r.bytes().toString('hex');
    else if (f === 4 && w === 2) s.parentSpanId = r.bytes().toString('hex');
    else if (f === 5 && w === 2) s.name = r.bytes().toString('utf8');
    else if (f === 6 && w === 0) s.kind = Number(r.varint());
    else if (f === 7 && w === 1) s.startMs = Number(r.fixed64() / 1000n) / 1000;
    else if (f === 8 && w === 1) s.endMs = Number(r.fixed64() / 1000n) / 1000;
    else if (f === 9 && w === 2) {
      const [k, v] = keyValue(r.bytes());
      s.attributes[k] = v;
    } else if (f === 13 && w === 2) {
      const link = { traceId: '', spanId: '', attributes: {} as Record<string, unknown> };
      fields(r.bytes(), (lf, lw, lr) => {
        if (lf === 1 && lw === 2) link.traceId = lr.bytes().toString('hex');
        else if (lf === 2 && lw === 2) link.spanId = lr.bytes().toString('hex');
        else if (lf === 4 && lw === 2) {
          const [k, v] = keyValue(lr.bytes());
          link.attributes[k] = v;
        } else return false;
        return true;
      });
      s.links.push(link);
    } else if (f === 15 && w === 2) {
      fields(r.bytes(), (sf, sw, sr) => {
        if (sf === 2 && sw === 2) s.status.message = sr.bytes().toString('utf8');
        else if (sf === 3 && sw === 0) s.status.code = Number(sr.varint());
        else return false;
        return true;
      });
    } else return false;
    return true;
  });
  return s;
}

function fromProtobuf(body: Buffer): ReceivedSpan[] {
  const out: ReceivedSpan[] = [];
  fields(body, (f, w, r) => {
    if (f !== 1 || w !== 2) return false;
    // ResourceSpans: 1 resource, 2 scope_spans.
    const resource: Record<string, unknown> = {};
    const scopes: Buffer[] = [];
    fields(r.bytes(), (rf, rw, rr) => {
      if (rf === 1 && rw === 2) {
        fields(rr.bytes(), (af, aw, ar) => {
          if (af !== 1 || aw !== 2) return false;
          const [k, v] = keyValue(ar.bytes());
          resource[k] = v;
          return true;
        });
      } else if (rf === 2 && rw === 2) scopes.push(rr.bytes());
      else return false;
      return true;
    });
    // ScopeSpans: 2 spans.
    for (const scope of scopes)
      fields(scope, (sf, sw, sr) => (sf === 2 && sw === 2 ? (out.push(span(sr.bytes(), resource)), true) : false));
    return true;
  });
  return out;
}

/** Every string value among a span's attributes, its links' and its resource's: what a secret must never be part of. */
export function attributeStrings(s: ReceivedSpan): string[] {
  const strings = (v: unknown): string[] =>
    typeof v === 'string' ? [v] : Array.isArray(v) ? v.flatMap(strings) : v === undefined || v === null ? [] : [String(v)];
  return [
    s.name,
    s.status.message ?? '',
    ...Object.values(s.attributes).flatMap(strings),
    ...s.links.flatMap((l) => Object.values(l.attributes).flatMap(strings)),
    ...Object.values(s.resource).flatMap(strings),
  ];
}

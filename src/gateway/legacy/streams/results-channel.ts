/**
 * The results channel of a stream, what the streams publish there and the sockets read: one
 * message per result (`r` + the result's JSON) or per end (`e` + the end reason). Both sides go
 * through `encodeEnvelope` and `decodeEnvelope`, so the wire format lives only here, beside the id
 * every result carries (`resultId`).
 */
import { createHash } from 'node:crypto';

/** UUID-shaped id of tick `tick` of a stream: the same on every replica, so a duplicate shows. */
export function resultId(streamId: string, tick: number): string {
  const h = createHash('sha256').update(`${streamId}:${tick}`).digest('hex');
  // Version 8 (custom) and the RFC 9562 variant, so it parses as a UUID.
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-8${h.slice(13, 16)}-${((parseInt(h[16]!, 16) & 0x3) | 0x8).toString(16)}${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

export const resultsChannel = (streamId: string): string => `results:${streamId}`;

/** One message of a results channel. */
export type ResultsEnvelope =
  /** A result's JSON as sent to the sockets; `resultId` is its `id` (decoded; ignored by the encoder). */
  { kind: 'result'; json: string; resultId?: string } | { kind: 'end'; reason: string };

const RESULT = 'r';
const END = 'e';
/** A legacy result's JSON starts with its id (`toLegacyResult` puts `id` first), so it is read without parsing the result. */
const ID_FIELD = '{"id":"';

export function encodeEnvelope(envelope: ResultsEnvelope): string {
  return envelope.kind === 'end' ? `${END}${envelope.reason}` : `${RESULT}${envelope.json}`;
}

/** The envelope of a channel message; undefined for a message no encoder wrote (nothing to deliver). */
export function decodeEnvelope(message: string): ResultsEnvelope | undefined {
  const tag = message.charAt(0);
  if (tag === END) return { kind: 'end', reason: message.slice(1) };
  if (tag !== RESULT) return undefined;
  const json = message.slice(1);
  return { kind: 'result', json, resultId: resultIdOf(json) };
}

/** The id of a result's JSON when it is the first field; ids are UUIDs (`resultId`), so no escapes. */
function resultIdOf(json: string): string | undefined {
  if (!json.startsWith(ID_FIELD)) return undefined;
  const end = json.indexOf('"', ID_FIELD.length);
  return end < 0 ? undefined : json.slice(ID_FIELD.length, end);
}

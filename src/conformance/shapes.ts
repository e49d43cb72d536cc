/**
 * Field-by-field shape checks of upstream bodies: each returns the problems it found (empty when
 * the body has what the gateway reads), worded with the field's path.
 */
import { isRecord } from '../lib/is-record';

export type Kind = 'string' | 'int' | 'number' | 'boolean' | 'object' | 'array' | 'null';

/** `'int|null'` style unions of kinds. */
export type Spec = Record<string, `${Kind}` | `${Kind}|${Kind}`>;

function kindOf(v: unknown): Kind | 'undefined' | 'other' {
  if (v === null) return 'null';
  if (v === undefined) return 'undefined';
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'number') return Number.isInteger(v) ? 'int' : 'number';
  if (typeof v === 'string' || typeof v === 'boolean' || typeof v === 'object') return typeof v as Kind;
  return 'other';
}

function matches(v: unknown, kinds: string[]): boolean {
  const k = kindOf(v);
  // An integer is also a number.
  return kinds.includes(k) || (k === 'int' && kinds.includes('number'));
}

/** Problems of `body` against `spec` (`where` prefixes the field names). */
export function shapeProblems(body: unknown, spec: Spec, where = ''): string[] {
  if (!isRecord(body)) return [`${where || 'body'} is not a JSON object`];
  const out: string[] = [];
  for (const [field, want] of Object.entries(spec)) {
    const v = body[field];
    if (!matches(v, want.split('|'))) out.push(`${where}${field} should be ${want}, got ${describe(v)}`);
  }
  return out;
}

export function describe(v: unknown): string {
  if (v === undefined) return 'nothing';
  const text = JSON.stringify(v);
  return text.length > 60 ? `${text.slice(0, 57)}...` : text;
}

export function problem(ok: boolean, text: string): string[] {
  return ok ? [] : [text];
}

export const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * A stream's output schema (`inference.output_schema_json`): compiled once at create through the
 * shared validator service, then each answer checked against it. Both texts are legacy-visible.
 */
import type { ValidateFunction } from 'ajv';
import type { JsonSchemaValidators } from '../../../lib/json-schema';
import { legacyError } from './validate';

/**
 * Compiles a legacy output schema through the shared validator service (caps, re2js patterns,
 * content-hash cache), or throws the 422 a client must see for an unusable one.
 */
export function compileOutputSchema(
  validators: JsonSchemaValidators,
  schema: Record<string, unknown>,
  loc: readonly string[] = ['body', 'inference', 'output_schema_json'],
): ValidateFunction {
  const r = validators.compile(schema);
  if (r.ok) return r.validate;
  throw legacyError(422, 'validation_error', `${loc[loc.length - 1]} is not a usable JSON Schema: ${r.error}`, [
    { loc: [...loc], msg: r.error, type: 'value_error' },
  ]);
}

/** Null when the answer is JSON matching the output schema, else why not. */
export function schemaMismatch(validate: ValidateFunction, text: unknown): string | null {
  if (typeof text !== 'string') return 'model returned no text';
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return 'model output is not valid JSON for output_schema_json';
  }
  if (validate(value)) return null;
  const first = validate.errors?.[0];
  return `model output does not match output_schema_json: ${first ? `${first.instancePath || '/'} ${first.message ?? ''}` : 'invalid'}`.trim();
}

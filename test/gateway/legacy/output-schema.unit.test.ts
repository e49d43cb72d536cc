import { JsonSchemaValidators } from '../../../src/lib/json-schema';
import { compileOutputSchema as compileWith } from '../../../src/gateway/legacy/contract/output-schema';

const validators = new JsonSchemaValidators();
const compileOutputSchema = (schema: Record<string, unknown>) => compileWith(validators, schema);

describe('compileOutputSchema', () => {
  test('the same $id compiles again (a second stream with the same schema), and validators keep working', () => {
    const schema = () => ({
      $id: 'https://example.com/answer.json',
      type: 'object',
      properties: { n: { type: 'integer' } },
      required: ['n'],
    });
    const a = compileOutputSchema(schema());
    const b = compileOutputSchema(schema());
    expect(a({ n: 1 })).toBe(true);
    expect(b({ n: 'x' })).toBe(false);
  });

  test('an invalid schema is a legacy 422 naming output_schema_json', () => {
    expect(() => compileOutputSchema({ type: 'no-such-type' })).toThrow(
      expect.objectContaining({
        status: 422,
        code: 'validation_error',
        options: expect.objectContaining({ details: [expect.objectContaining({ loc: ['body', 'inference', 'output_schema_json'] })] }),
      }),
    );
  });
});

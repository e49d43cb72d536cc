/**
 * The migration guide's TypeScript examples, as a customer copies them from the served guide, type-
 * check against the real `openai` package and Node's types: a whole program on its own, and each
 * snippet that says it belongs in the program above ("// In the program above: …") appended to it.
 */
import fs from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import { loadConfig } from '../../../src/config';
import { ROOT } from '../../helpers/util';
import type { Example } from './guide-examples';
import { PROVIDER_PROFILE, servedGuide, typescriptExamples } from './guide-examples';

/** What a customer's strict project on Node would say: ESM (top-level await), Node's types, no unused names. */
const OPTIONS: ts.CompilerOptions = {
  strict: true,
  noUncheckedIndexedAccess: true,
  noUnusedLocals: true,
  noUnusedParameters: true,
  noEmit: true,
  target: ts.ScriptTarget.ES2022,
  module: ts.ModuleKind.NodeNext,
  moduleResolution: ts.ModuleResolutionKind.NodeNext,
  lib: ['lib.es2022.d.ts'],
  types: ['node'],
  skipLibCheck: true,
};

/**
 * Type-checks each example as its own `.mts` module in one program. The files exist only in memory,
 * placed beside this test so that `import OpenAI from 'openai'` resolves to the installed package.
 */
function typeErrors(examples: Example[]): Map<string, string[]> {
  const files = new Map(examples.map((e, i) => [path.join(__dirname, `guide-example-${i}.mts`), e]));
  const host = ts.createCompilerHost(OPTIONS);
  const getSourceFile = host.getSourceFile.bind(host);
  host.getSourceFile = (name, version, ...rest) => {
    const example = files.get(path.resolve(name));
    return example ? ts.createSourceFile(name, example.code, version) : getSourceFile(name, version, ...rest);
  };
  const fileExists = host.fileExists.bind(host);
  host.fileExists = (name) => files.has(path.resolve(name)) || fileExists(name);
  const program = ts.createProgram([...files.keys()], OPTIONS, host);
  const errors = new Map(examples.map((e) => [e.label, [] as string[]]));
  for (const d of [...program.getOptionsDiagnostics(), ...program.getGlobalDiagnostics()]) {
    throw new Error(`the type check itself is misconfigured: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`);
  }
  for (const [file, example] of files) {
    const source = program.getSourceFile(file)!;
    for (const d of [...program.getSyntacticDiagnostics(source), ...program.getSemanticDiagnostics(source)]) {
      const { line } = source.getLineAndCharacterOfPosition(d.start ?? 0);
      const text = example.code.split('\n')[line]?.trim();
      errors.get(example.label)!.push(`line ${line + 1} (${text}): ${ts.flattenDiagnosticMessageText(d.messageText, ' ')}`);
    }
  }
  return errors;
}

const served = {
  default: servedGuide(loadConfig({ env: {} })),
  provider: servedGuide(loadConfig({ env: { PUBLIC_URL: 'https://gateway.customer.example' }, file: PROVIDER_PROFILE })),
};

test('every TypeScript example of the served guide type-checks against the openai package, under both profiles', () => {
  expect(fs.existsSync(path.join(ROOT, 'node_modules', 'openai', 'package.json'))).toBe(true);
  const examples = [...typescriptExamples(served.default, 'default profile'), ...typescriptExamples(served.provider, 'provider profile')];
  // The clip program and its two snippets (structured output, streaming), per profile.
  expect(examples).toHaveLength(6);
  const provider = examples.filter((e) => e.label.startsWith('provider'));
  expect(provider[0]!.code).toContain('ovs://streams/');
  expect(provider[0]!.code).toContain("const BASE = 'https://gateway.customer.example';");
  // One broken program rides along: the check must find what the guide once had wrong.
  const broken = { label: 'an undefined publisher', code: "export {};\npublisher.updateToken('t');\n", continues: false };
  const errors = typeErrors([...examples, broken]);
  expect(errors.get(broken.label)).toEqual([expect.stringContaining("Cannot find name 'publisher'")]);
  errors.delete(broken.label);
  expect(Object.fromEntries(errors)).toEqual(Object.fromEntries(examples.map((e) => [e.label, []])));
}, 120_000);

test('a snippet "in the program above" with no program before it is an error, not skipped', () => {
  const md = '# T\n\n```ts\n// In the program above: nothing.\nconsole.log(1);\n```\n';
  expect(() => typescriptExamples(md, 'x')).toThrow(/no program above it/);
});

test('the examples leave nothing undefined for the customer to guess: publisher, request and the model are defined', () => {
  const [program] = typescriptExamples(served.provider, 'provider profile');
  expect(program!.code).toMatch(/^function givePublisher\(/m);
  expect(program!.code).toMatch(/^const request = \{/m);
  expect(program!.code).toContain("'/v1beta/models'");
  expect(served.provider).not.toContain('provider/model-name');
});

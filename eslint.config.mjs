import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import globals from 'globals';

/**
 * Import boundaries: each src folder's README says what it may import; these rules hold it to
 * that (patterns match the import string as written, so they name relative paths).
 */
const boundary = (message, group, extra = {}) => ({ group, message, ...extra });
const never = (...names) => names.flatMap((n) => [`**/${n}`, `**/${n}/**`]);
const siblings = (...names) => names.flatMap((n) => [`../${n}`, `../${n}/**`]);
const gatewayRules = [boundary('src/gateway never imports the emulator (src/gateway/README.md)', never('emulator'))];
const restrict = (...patterns) => ({ '@typescript-eslint/no-restricted-imports': ['error', { patterns }] });
const GATEWAY_TOP = ['app', 'server', 'passthrough', 'admin', 'operator'];

const boundaries = [
  { files: ['src/config.ts'], rules: restrict(boundary('src/config.ts imports nothing from src/gateway (it is read by every part of src)', ['./gateway', './gateway/**'])) },
  { files: ['src/lib/**/*.ts'], rules: restrict(boundary('src/lib imports nothing from the rest of src/ (src/lib/README.md)', ['../*', '../**'])) },
  {
    files: ['src/upstream/**/*.ts'],
    rules: restrict(
      boundary('src/upstream never imports the gateway or the emulator (src/upstream/README.md)', never('gateway', 'emulator')),
      boundary('src/upstream takes only types from src/config.ts (src/upstream/README.md)', ['../config'], { allowTypeImports: true }),
    ),
  },
  {
    files: ['src/emulator/**/*.ts'],
    rules: restrict(boundary('the emulator stays a stand-alone provider: never the gateway or src/upstream (src/emulator/README.md)', never('gateway', 'upstream'))),
  },
  {
    files: ['src/conformance/**/*.ts'],
    rules: restrict(
      boundary('src/conformance never imports the emulator: it checks any upstream (src/conformance/README.md)', never('emulator')),
      {
        regex: '^\\.\\./gateway(?!/ingest/(publisher|natives)$)(/|$)',
        message: "src/conformance takes from src/gateway only the relay's room publisher (src/conformance/README.md)",
      },
      boundary('src/conformance takes only types from src/config.ts (src/conformance/README.md)', ['../config'], { allowTypeImports: true }),
    ),
  },
  { files: ['src/gateway/**/*.ts'], rules: restrict(...gatewayRules) },
  {
    files: ['src/gateway/legacy/**/*.ts'],
    rules: restrict(
      ...gatewayRules,
      boundary('src/gateway/legacy may import lib, brand, config, upstream and ../store only (its README)', [
        ...siblings('telemetry', 'ingest', 'fleet'),
        '../http',
        ...GATEWAY_TOP.map((n) => `../${n}`),
      ]),
    ),
  },
  {
    files: ['src/gateway/fleet/**/*.ts'],
    rules: restrict(
      ...gatewayRules,
      boundary('src/gateway/fleet may import lib, config, ../store and the types of ../legacy/session-ports only (its README)', [
        ...siblings('telemetry', 'ingest'),
        '../http',
        ...GATEWAY_TOP.map((n) => `../${n}`),
        '../../upstream',
        '../../upstream/**',
        '../../brand',
      ]),
      boundary('src/gateway/fleet takes only types from ../legacy (its README)', ['../legacy', '../legacy/**'], { allowTypeImports: true }),
    ),
  },
  {
    files: ['src/gateway/ingest/**/*.ts'],
    rules: restrict(
      ...gatewayRules,
      boundary('src/gateway/ingest may import config, lib and gateway/legacy only (its README)', [
        ...siblings('telemetry', 'store'),
        '../http',
        ...GATEWAY_TOP.map((n) => `../${n}`),
        '../../upstream',
        '../../upstream/**',
        '../../brand',
      ]),
    ),
  },
];

export default tseslint.config(
  { ignores: ['dist/**', 'dist-bench/**', 'node_modules/**', 'coverage/**', 'test/browser/bundles/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { ...globals.node } },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
      'no-console': 'off',
    },
  },
  ...boundaries,
  // Tests read untyped JSON bodies: `any` there beats a cast on every line.
  { files: ['test/**/*.ts'], rules: { '@typescript-eslint/no-explicit-any': 'off' } },
  { files: ['**/*.js', '**/*.mjs', '**/*.cjs'], rules: { '@typescript-eslint/no-require-imports': 'off' } },
);

import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import globals from 'globals';
import jest from 'eslint-plugin-jest';

/**
 * Import boundaries: each src folder's README says what it may import; these rules hold it to
 * that (patterns match the import string as written, so they name relative paths).
 */
const boundary = (message, group, extra = {}) => ({ group, message, ...extra });
const never = (...names) => names.flatMap((n) => [`**/${n}`, `**/${n}/**`]);
const siblings = (...names) => names.flatMap((n) => [`../${n}`, `../${n}/**`]);
const gatewayRules = [boundary('src/gateway never imports the emulator (src/gateway/README.md)', never('emulator'))];
const restrict = (...patterns) => ({ '@typescript-eslint/no-restricted-imports': ['error', { patterns }] });
const GATEWAY_TOP = ['app', 'server', 'passthrough', 'admin', 'operator', 'lifecycle', 'shutdown', 'http-app', 'callers'];
const frontDoor = {
  regex: '(^|/)legacy/(contract|streams|http)(/|$)',
  message: 'the rest of the gateway enters src/gateway/legacy by its front door, legacy/index.ts (its README)',
};
const legacyWide = boundary('src/gateway/legacy may import lib, brand, config, upstream and the store only (its README)', [
  ...['telemetry', 'ingest', 'fleet', 'http', ...GATEWAY_TOP].flatMap((n) => [`../../${n}`, `../../${n}/**`]),
  ...siblings('telemetry', 'ingest', 'fleet'),
  ...GATEWAY_TOP.map((n) => `../${n}`),
]);

const boundaries = [
  {
    files: ['src/config.ts'],
    rules: restrict(
      boundary('src/config.ts imports nothing from src/gateway (it is read by every part of src)', ['./gateway', './gateway/**']),
    ),
  },
  {
    files: ['src/lib/**/*.ts'],
    rules: restrict(boundary('src/lib imports nothing from the rest of src/ (src/lib/README.md)', ['../*', '../**'])),
  },
  {
    files: ['src/upstream/**/*.ts'],
    rules: restrict(
      boundary('src/upstream never imports the gateway or the emulator (src/upstream/README.md)', never('gateway', 'emulator')),
      boundary('src/upstream takes only types from src/config.ts (src/upstream/README.md)', ['../config'], { allowTypeImports: true }),
    ),
  },
  {
    files: ['src/emulator/**/*.ts'],
    rules: restrict(
      boundary(
        'the emulator stays a stand-alone provider: never the gateway or src/upstream (src/emulator/README.md)',
        never('gateway', 'upstream'),
      ),
    ),
  },
  {
    files: ['src/conformance/**/*.ts'],
    rules: restrict(
      boundary('src/conformance never imports the emulator: it checks any upstream (src/conformance/README.md)', never('emulator')),
      {
        regex: '^\\.\\./gateway(?!/ingest/worker-process$)(/|$)',
        message: "src/conformance takes from src/gateway only the media worker's client, for its test pattern (src/conformance/README.md)",
      },
      boundary('src/conformance takes only types from src/config.ts (src/conformance/README.md)', ['../config'], {
        allowTypeImports: true,
      }),
    ),
  },
  {
    files: ['src/gateway/**/*.ts'],
    ignores: ['src/gateway/legacy/**'],
    rules: restrict(...gatewayRules, frontDoor),
  },
  { files: ['src/gateway/legacy/**/*.ts'], rules: restrict(...gatewayRules, legacyWide) },
  {
    files: ['src/gateway/legacy/contract/**/*.ts'],
    rules: restrict(
      ...gatewayRules,
      legacyWide,
      boundary('legacy/contract is the pure wire layer: no streams, HTTP, store or upstream client (src/gateway/legacy/README.md)', [
        ...siblings('streams', 'http'),
        '../../store',
        '../../store/**',
        '../../../upstream/client',
        '../../../upstream/retry',
        '../../../upstream/breaker',
      ]),
    ),
  },
  {
    files: ['src/gateway/legacy/streams/**/*.ts'],
    rules: restrict(
      ...gatewayRules,
      legacyWide,
      boundary(
        'legacy/streams never imports legacy/http: the sockets and routes sit above it (src/gateway/legacy/README.md)',
        siblings('http'),
      ),
    ),
  },
  {
    files: ['src/gateway/fleet/**/*.ts'],
    rules: restrict(
      ...gatewayRules,
      frontDoor,
      boundary('src/gateway/fleet may import lib, config, ../store and the types of ../legacy only (its README)', [
        ...siblings('telemetry', 'ingest'),
        '../http',
        ...GATEWAY_TOP.map((n) => `../${n}`),
        '../../upstream',
        '../../upstream/**',
        '../../brand',
      ]),
      boundary('src/gateway/fleet takes only types from ../legacy (its README)', ['../legacy'], { allowTypeImports: true }),
    ),
  },
  {
    files: ['src/gateway/ingest/**/*.ts'],
    rules: restrict(
      ...gatewayRules,
      frontDoor,
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
  // A focused test silently skips the rest of its file; a skipped one is a test that no longer runs.
  {
    files: ['test/**/*.test.ts', 'src/**/*.test.ts'],
    plugins: { jest },
    rules: { 'jest/no-focused-tests': 'error', 'jest/no-disabled-tests': 'error' },
  },
  { files: ['**/*.js', '**/*.mjs', '**/*.cjs'], rules: { '@typescript-eslint/no-require-imports': 'off' } },
);

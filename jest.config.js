/**
 * Two projects, split by what a test does (test/README.md):
 * - unit: `*.unit.test.ts`, pure logic, no sockets, processes or servers (its environment refuses
 *   them); `npm run test:unit` is the fast loop;
 * - integration: every other `*.test.ts` (real sockets, servers, child processes, redis-server,
 *   chromium, haproxy, promtool).
 * `jest` runs both; `--selectProjects unit|integration` one.
 */
const shared = {
  roots: ['<rootDir>/test', '<rootDir>/src'],
  transform: { '^.+\\.ts$': ['@swc/jest', { jsc: { target: 'es2022', parser: { syntax: 'typescript' } } }] },
};

/** @type {import('jest').Config} */
module.exports = {
  projects: [
    { ...shared, displayName: 'unit', testEnvironment: '<rootDir>/test/unit-environment.js', testMatch: ['**/*.unit.test.ts'] },
    {
      ...shared,
      displayName: 'integration',
      testEnvironment: 'node',
      testMatch: ['**/*.test.ts'],
      testPathIgnorePatterns: ['/node_modules/', '\\.unit\\.test\\.ts$'],
    },
  ],
  testTimeout: 30000,
  // Integration tests bind real sockets and timers; two workers match the 2-core machines.
  maxWorkers: 2,
};

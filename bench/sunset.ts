/**
 * What the sunset tooling adds to hot paths, in-process: the migration hook on every successful
 * passthrough request (bearer parse, memoised key hash, client family, in-process sum; the store
 * writes come in batches), the key-hash memo against a plain sha256, and the brownout admission
 * check on a create (warm, and the one full cron scan a policy pays at boot).
 */
import { loadConfig } from '../src/config';
import { SunsetPolicy } from '../src/gateway/legacy/http/sunset';
import { memoryStore } from '../src/gateway/store/memory';
import { clientFamily } from '../src/gateway/telemetry/migration';
import { DeprecationUsage } from '../src/gateway/telemetry/usage';
import { parseBearer } from '../src/lib/bearer';
import { keyHash, memoKeyHash } from '../src/lib/keys';
import { createLogger } from '../src/lib/logger';

const N = 200_000;

function nsPer(n: number, fn: (i: number) => void): number {
  const t = process.hrtime.bigint();
  for (let i = 0; i < n; i++) fn(i);
  return Number(process.hrtime.bigint() - t) / n;
}

export async function benchSunset(): Promise<void> {
  const store = memoryStore();
  const usage = new DeprecationUsage(store, createLogger('silent'));
  const keys = Array.from({ length: 100 }, (_, i) => `svc-bench-${i}-${'k'.repeat(32)}`);
  const auth = keys.map((k) => `Bearer ${k}`);
  const hook = (i: number) => {
    const key = parseBearer(auth[i % keys.length]);
    if (key?.startsWith('svc-')) usage.passthrough(memoKeyHash(key), i % 10 ? 'v1beta' : 'billing', clientFamily('svc-node/2.0.1 (linux)'));
  };
  nsPer(20_000, hook); // warm-up
  await usage.flush();
  const hookNs = nsPer(N, hook);
  const t = process.hrtime.bigint();
  await usage.flush();
  const flushMs = Number(process.hrtime.bigint() - t) / 1e6;
  console.log(
    `passthrough migration hook: ${hookNs.toFixed(0)} ns/request (100 keys); batch write of ${keys.length} keys: ${flushMs.toFixed(2)} ms`,
  );
  console.log(
    `key hash: memo ${nsPer(N, (i) => memoKeyHash(keys[i % keys.length]!)).toFixed(0)} ns, sha256 ${nsPer(N, (i) => keyHash(keys[i % keys.length]!)).toFixed(0)} ns`,
  );

  const cfg = loadConfig({
    env: {},
    skipDefaultFile: true,
    overrides: { deprecation: { brownouts: { schedule: [{ cron: '0 15 * * 2', durationMinutes: 240 }] } } },
  });
  let now = Date.parse('2026-03-10T12:00:00Z');
  const b = process.hrtime.bigint();
  const policy = new SunsetPolicy(cfg.deprecation, { now: () => now });
  const bootMs = Number(process.hrtime.bigint() - b) / 1e6;
  const warm = nsPer(N, () => policy.admitCreate('0123456789abcdef'));
  // A minute later: one cron match per schedule.
  const nextMinute = nsPer(1_000, () => {
    now += 60_000;
    policy.admitCreate('0123456789abcdef');
  });
  console.log(
    `brownout check: boot scan of a 240-minute schedule ${bootMs.toFixed(1)} ms; per create ${warm.toFixed(0)} ns warm, ${(nextMinute / 1000).toFixed(1)} µs on a new minute`,
  );
  await policy.close();
  await store.close();
}

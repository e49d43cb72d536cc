/**
 * The deprecation report loses no customer to a crash, on real processes: a replica SIGKILLed right
 * after a key's first /v0.2 create (long before its 15 s counter flush) still leaves the key, its
 * last-seen and that create in the fleet's report, read from the survivor.
 */
import { keyHash } from '../../../src/lib/keys';
import type { DeprecationReport } from '../../../src/gateway/telemetry/usage-report';
import { KEY, frameBody, http, useFleet } from '../fleet/fleet-test';

const ADMIN = 'admin-token-for-the-crash-report-test';
const fleet = useFleet({ ids: ['A', 'B'], env: { ADMIN_TOKEN: ADMIN } });

test("SIGKILL right after a key's first create: the survivor's report lists the key and that create", async () => {
  const [a, b] = [fleet().replica('A'), fleet().replica('B')];
  const before = Date.now();
  const created = await http(a.url, 'POST', '/v0.2/streams', { body: frameBody({ interval_seconds: 5 }) });
  expect(created.status).toBe(201);
  a.kill('SIGKILL');

  const r = await http(b.url, 'GET', '/admin/deprecation', { key: ADMIN });
  expect(r.status).toBe(200);
  const report = r.body as DeprecationReport;
  const entry = report.keys.find((k) => k.key_hash === keyHash(KEY));
  expect(entry).toBeDefined();
  expect(entry!.requests['POST /v0.2/streams']).toBe(1);
  expect(Date.parse(entry!.last_seen_at!)).toBeGreaterThanOrEqual(before - 1000);
  expect(entry!.account_ids).toHaveLength(1);
  // Figures may lag a crash; the first stream of the day is written through as well.
  console.log(`report after the crash: streams ${entry!.streams.total}, requests ${JSON.stringify(entry!.requests)}`);
});

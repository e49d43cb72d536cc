/**
 * A short seeded chaos run on real processes (test/helpers/chaos.ts: redis-server with AOF, the
 * emulator, three replica CLIs): SIGKILL, SIGTERM and SIGSTOP/SIGCONT of replicas (each killed or
 * drained one replaced by a new process on a fresh port), Redis restarted with its AOF and paused,
 * one replica cut from Redis or from the upstream, and Redis and the upstream slowed for everyone,
 * under 10 streams over two keys whose results sockets reconnect as the Python SDK does and whose
 * keepalives retry as it does. The invariants: no stream ends unless asked, no result is delivered
 * twice, every stream delivers again within the documented bound after each fault (plus slack for a
 * loaded CI box: a liveness check, not a latency figure; `npm run bench -- chaos` measures), the
 * 5-stream limit is exact afterwards, and no slot or upstream stream is left once all are deleted.
 */
import { FAULT_KINDS, formatChaos, runChaos } from '../../helpers/chaos';
import type { ChaosReport } from '../../helpers/chaos';
import { useMainBundle } from '../../helpers/main-bundle';
import { KEY } from '../../helpers/stack';

const bundle = useMainBundle();
let report: ChaosReport | undefined;

beforeAll(async () => {
  report = await runChaos({
    main: bundle().file,
    brand: KEY.slice(0, KEY.indexOf('-')),
    seed: Number(process.env.CHAOS_SEED ?? 7),
    durationMs: 96_000,
    faultEveryMs: 12_000,
    streams: 10,
    slackMs: 5000,
  });
  console.log(formatChaos(report));
}, 300_000);

const invariant = (name: string) => {
  const i = report!.invariants.find((x) => x.name === name);
  if (!i) throw new Error(`no invariant ${name}`);
  return i;
};

test('the seeded sequence ran every kind of fault', () => {
  expect(new Set(report!.faults.map((f) => f.kind))).toEqual(new Set(FAULT_KINDS));
});

test.each([
  'no stream ends unless asked',
  'no result delivered twice',
  'every stream delivers again within the bound after each fault',
  'the 5-stream limit is exact afterwards',
  'every keepalive succeeds within the SDK retries',
  'nothing left behind once all are deleted',
  'a deleted stream closes its socket 1001 client_requested',
])('%s', (name) => {
  expect(invariant(name)).toMatchObject({ ok: true });
});

/**
 * Short seeded chaos runs on real processes (test/helpers/chaos.ts: the emulator, three replica
 * CLIs), once on one redis-server with AOF and once on a Sentinel set: SIGKILL, SIGTERM and
 * SIGSTOP/SIGCONT of replicas (each killed or drained one replaced by a new process on a fresh
 * port); on plain Redis, Redis restarted with its AOF and paused, one replica cut from Redis, Redis
 * slowed for everyone; on Sentinel, the primary SIGKILLed and the old one back as a replica; on
 * both, one replica cut from the upstream and the upstream slowed. Under 10 streams over two keys
 * whose results sockets reconnect as the Python SDK does and whose keepalives retry as it does. The
 * invariants: no stream ends unless asked, no result is delivered twice, every stream delivers again
 * within the documented bound after each fault (plus slack for a loaded CI box: a liveness check,
 * not a latency figure; `npm run bench -- chaos` measures), the 5-stream limit is exact afterwards,
 * and no slot or upstream stream is left once all are deleted.
 */
import { FAULT_KINDS, formatChaos, runChaos, SENTINEL_FAULT_KINDS } from '../../helpers/chaos';
import type { ChaosReport } from '../../helpers/chaos';
import { useMainBundle } from '../../helpers/main-bundle';
import { KEY } from '../../helpers/stack';

const bundle = useMainBundle();
describe.each([
  { store: 'redis' as const, kinds: FAULT_KINDS, durationMs: 96_000 },
  { store: 'sentinel' as const, kinds: SENTINEL_FAULT_KINDS, durationMs: 72_000 },
])('on $store', ({ store, kinds, durationMs }) => {
  let report: ChaosReport | undefined;

  beforeAll(async () => {
    report = await runChaos({
      main: bundle().file,
      brand: KEY.slice(0, KEY.indexOf('-')),
      store,
      seed: Number(process.env.CHAOS_SEED ?? 7),
      durationMs,
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
    expect(new Set(report!.faults.map((f) => f.kind))).toEqual(new Set(kinds));
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
});

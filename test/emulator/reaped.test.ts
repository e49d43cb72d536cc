/**
 * The provider's `reaped` end reason: the emulator reaps an active stream that had no frame for
 * `emulator.reapIdleSeconds` (off by default). The clock is injected and moved; which reason a stream
 * ends with is decided by event order, not by timers firing.
 */
import { loadConfig } from '../../src/config';
import type { Account } from '../../src/emulator/accounts';
import { renderPatternRgb } from '../../src/emulator/frames/pattern';
import { startEmulator } from '../../src/emulator/server';
import { StreamRegistry } from '../../src/emulator/streams';
import type { EmulatedStream } from '../../src/emulator/streams';
import { createLogger } from '../../src/lib/logger';
import { http } from '../helpers/stack';
import { testConfig } from '../helpers/config';

const T0 = 1_700_000_000_000;
const ACCOUNT = { id: 'acct-1' } as Account;

function registry(emulator: Record<string, unknown>) {
  const cfg = loadConfig({ env: {}, overrides: { emulator } }).emulator;
  const clock = { now: T0 };
  const streams = new StreamRegistry(cfg, () => clock.now);
  const ended: string[] = [];
  streams.onEnd((s) => ended.push(`${s.id}:${s.endReason}`));
  return { streams, clock, ended };
}

async function frameAt(stream: EmulatedStream, capturedAtMs: number): Promise<void> {
  void stream.frames.ingest(
    { width: 16, height: 12, format: 'rgb', data: renderPatternRgb(stream.frames.nextIndex, 16, 12) },
    capturedAtMs,
  );
  await stream.frames.drain();
}

describe('StreamRegistry reaping', () => {
  it('reaps a stream reapIdleSeconds after its last frame, not a millisecond before; the end is snapshotted and announced', async () => {
    const { streams, clock, ended } = registry({ reapIdleSeconds: 60 });
    const s = streams.create(ACCOUNT);
    await frameAt(s, T0 + 1000);
    clock.now = T0 + 60_999;
    expect(streams.get(s.id)?.state).toBe('active');
    clock.now = T0 + 61_000;
    expect(streams.view(streams.get(s.id)!)).toMatchObject({
      state: 'ended',
      end_reason: 'reaped',
      ended_at_ms: T0 + 61_000,
      last_frame_index: 0,
    });
    expect(ended).toEqual([`${s.id}:reaped`]);
    streams.close();
  });

  it('the sweep reaps streams nobody reads, counting from creation when no frame ever came', () => {
    const { streams, clock, ended } = registry({ reapIdleSeconds: 60 });
    const idle = streams.create(ACCOUNT);
    clock.now = T0 + 30_000;
    const young = streams.create(ACCOUNT);
    clock.now = T0 + 60_000;
    expect(streams.reapIdle()).toBe(1);
    expect(ended).toEqual([`${idle.id}:reaped`]);
    expect(young.state).toBe('active');
    streams.close();
  });

  it('a lease that ran out before the stream was due for reaping ends it expired', () => {
    const { streams, clock } = registry({ reapIdleSeconds: 600, leaseTtlSeconds: 300 });
    const s = streams.create(ACCOUNT);
    clock.now = T0 + 700_000;
    expect(streams.get(s.id)?.endReason).toBe('expired');
    streams.close();
  });

  it('is off by default', () => {
    const { streams, clock } = registry({});
    const s = streams.create(ACCOUNT);
    clock.now = T0 + 299_000;
    expect(streams.reapIdle()).toBe(0);
    expect(streams.get(s.id)?.state).toBe('active');
    streams.close();
  });
});

describe('reaped over HTTP', () => {
  it('GET shows end_reason reaped; the stream can no longer be referenced; the control API reaps on demand', async () => {
    const clock = { now: Date.now() };
    const cfg = testConfig({ emulator: { reapIdleSeconds: 60 } });
    const emu = await startEmulator(cfg, createLogger('silent'), { now: () => clock.now });
    try {
      const { id } = (await http(emu.url, 'POST', '/v1beta/streams', { body: {} })).body as { id: string };
      clock.now += 60_000;
      const got = await http(emu.url, 'GET', `/v1beta/streams/${id}`);
      expect(got.body).toMatchObject({ id, state: 'ended', end_reason: 'reaped', expires_at_ms: null });
      const ask = await http(emu.url, 'POST', '/v1beta/chat/completions', {
        body: {
          model: 'local/analyzer',
          messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: `svc://streams/${id}?frame_index=-1` } }] }],
        },
      });
      expect(ask.status).toBe(404);

      const other = (await http(emu.url, 'POST', '/v1beta/streams', { body: {} })).body as { id: string };
      const reaped = await http(emu.url, 'POST', `/_emulator/streams/${other.id}/reap`);
      expect(reaped.body).toMatchObject({ state: 'ended', end_reason: 'reaped' });
    } finally {
      await emu.close();
    }
  });
});

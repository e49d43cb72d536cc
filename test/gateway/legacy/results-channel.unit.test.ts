/**
 * The results channel's envelope: the exact bytes on the wire (a fleet of mixed versions shares the
 * channel), the round trip, and what a decoder makes of messages no encoder wrote.
 */
import { toLegacyResult } from '../../../src/gateway/legacy/contract/responses';
import { resultId } from '../../../src/gateway/legacy/streams/results-channel';
import { decodeEnvelope, encodeEnvelope, resultsChannel } from '../../../src/gateway/legacy/streams/results-channel';
import type { ResultsEnvelope } from '../../../src/gateway/legacy/streams/results-channel';

describe('results channel envelope', () => {
  const id = resultId('s1', 7);
  const json = JSON.stringify(
    toLegacyResult({
      id,
      streamId: 's1',
      spec: { mode: 'frame', backend: 'svc', model: 'acme/vision-1' },
      prompt: 'Count people',
      completion: { model: 'acme/vision-1', choices: [{ message: { content: 'two' }, finish_reason: 'stop' }] },
      inferenceLatencyMs: 12,
      totalLatencyMs: 20,
    }),
  );

  it('names the channel after the stream', () => {
    expect(resultsChannel('s1')).toBe('results:s1');
  });

  it('a result is `r` and its JSON, byte for byte; decoding gives back the JSON and its id', () => {
    const wire = encodeEnvelope({ kind: 'result', json });
    expect(wire).toBe(
      `r{"id":"${id}","stream_id":"s1","mode":"frame","model_backend":"svc","model_name":"acme/vision-1","prompt":"Count people",` +
        `"result":"two","inference_latency_ms":12,"total_latency_ms":20,"ok":true,"error":null,"finish_reason":"stop"}`,
    );
    expect(decodeEnvelope(wire)).toEqual({ kind: 'result', json, resultId: id });
  });

  it('an end is `e` and its reason, byte for byte, and decodes back', () => {
    const wire = encodeEnvelope({ kind: 'end', reason: 'client_requested' });
    expect(wire).toBe('eclient_requested');
    expect(decodeEnvelope(wire)).toEqual({ kind: 'end', reason: 'client_requested' });
  });

  it('round trips any result JSON or reason, including empty ones and ones that look like envelopes', () => {
    const cases: ResultsEnvelope[] = [
      { kind: 'result', json: '{"i":1}' },
      { kind: 'result', json: '' },
      { kind: 'result', json: 'e{"id":"x"}' },
      { kind: 'end', reason: '' },
      { kind: 'end', reason: 'r{"id":"x"}' },
      { kind: 'end', reason: 'lease_expired ✓' },
    ];
    for (const envelope of cases) {
      const wire = encodeEnvelope(envelope);
      const back = decodeEnvelope(wire);
      expect(back && encodeEnvelope(back)).toBe(wire);
      expect(back?.kind).toBe(envelope.kind);
    }
  });

  it('a result without a leading id decodes without one (delivered, never taken for a repeat)', () => {
    expect(decodeEnvelope('r{"i":1,"id":"late"}')).toEqual({ kind: 'result', json: '{"i":1,"id":"late"}', resultId: undefined });
    expect(decodeEnvelope('r{"id":"unterminated')).toEqual({ kind: 'result', json: '{"id":"unterminated', resultId: undefined });
  });

  it('a message no encoder wrote decodes to nothing', () => {
    for (const wire of ['', 'x', '{"id":"a"}', 'R{}', 'E']) expect(decodeEnvelope(wire)).toBeUndefined();
  });
});

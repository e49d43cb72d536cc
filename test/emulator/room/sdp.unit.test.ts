import { gzipSync } from 'node:zlib';
import { JoinRequest, WrappedJoinRequest, WrappedJoinRequest_Compression } from '@livekit/protocol';
import { acceptTopSimulcastLayer, mids, offeredSimulcast, topLayerRid, withStartBitrate } from '../../../src/emulator/room/sdp';
import { candidateToJson, decodeJoinRequest, newSid, parseCandidate, parseJoinParams } from '../../../src/emulator/room/signal';

const sdp = (...lines: string[]) => `${lines.join('\r\n')}\r\n`;

const OFFER = sdp(
  'v=0',
  'o=- 1 2 IN IP4 127.0.0.1',
  's=-',
  't=0 0',
  'a=group:BUNDLE 0 1',
  'm=application 9 UDP/DTLS/SCTP webrtc-datachannel',
  'a=mid:0',
  'm=video 9 UDP/TLS/RTP/SAVPF 96',
  'a=mid:1',
  'a=sendonly',
  'a=rid:q send',
  'a=rid:h send',
  'a=rid:f send',
  'a=simulcast:send q;h;f',
);

const ANSWER = sdp(
  'v=0',
  'o=- 3 2 IN IP4 127.0.0.1',
  's=-',
  't=0 0',
  'a=group:BUNDLE 0 1',
  'm=application 9 UDP/DTLS/SCTP webrtc-datachannel',
  'a=mid:0',
  'm=video 9 UDP/TLS/RTP/SAVPF 96',
  'a=mid:1',
  'a=recvonly',
);

describe('simulcast answer munging', () => {
  test('finds the simulcast sections and picks the top layer', () => {
    expect(offeredSimulcast(OFFER)).toEqual([{ mid: '1', rids: ['q', 'h', 'f'] }]);
    expect(topLayerRid(['q', 'h', 'f'])).toBe('f');
    expect(topLayerRid(['low', 'mid', 'high'])).toBe('high');
    expect(offeredSimulcast(OFFER.replace('q;h;f', '~q,x;h;f'))[0].rids).toEqual(['q', 'h', 'f']);
  });

  test('accepts only the top rid in the matching answer section', () => {
    const { sdp: munged, accepted } = acceptTopSimulcastLayer(OFFER, ANSWER);
    expect(accepted).toEqual([{ mid: '1', rid: 'f' }]);
    expect(munged).toBe(`${ANSWER}a=rid:f recv\r\na=simulcast:recv f\r\n`);
    expect(mids(munged)).toEqual(['0', '1']);
  });

  test('works when the simulcast section is not the last one', () => {
    const offer = sdp('v=0', 'm=video 9 UDP/TLS/RTP/SAVPF 96', 'a=mid:1', 'a=simulcast:send q;h;f', 'm=application 9 x', 'a=mid:0');
    const answer = sdp('v=0', 'm=video 9 UDP/TLS/RTP/SAVPF 96', 'a=mid:1', 'a=recvonly', 'm=application 9 x', 'a=mid:0');
    const { sdp: munged } = acceptTopSimulcastLayer(offer, answer);
    expect(munged).toBe(
      sdp(
        'v=0',
        'm=video 9 UDP/TLS/RTP/SAVPF 96',
        'a=mid:1',
        'a=recvonly',
        'a=rid:f recv',
        'a=simulcast:recv f',
        'm=application 9 x',
        'a=mid:0',
      ),
    );
  });

  test('leaves answers alone without simulcast, or when rejected / already answered', () => {
    const plain = OFFER.replace(/a=rid:.*\r\n|a=simulcast:.*\r\n/g, '');
    expect(acceptTopSimulcastLayer(plain, ANSWER)).toEqual({ sdp: ANSWER, accepted: [] });
    const rejected = ANSWER.replace('m=video 9', 'm=video 0');
    expect(acceptTopSimulcastLayer(OFFER, rejected).accepted).toEqual([]);
    const already = `${ANSWER}a=simulcast:recv q;h;f\r\n`;
    expect(acceptTopSimulcastLayer(OFFER, already).sdp).toBe(already);
  });
});

test('start bitrate goes into every video codec fmtp, not RTX or audio', () => {
  const answer = sdp(
    'v=0',
    'm=audio 9 x 111',
    'a=rtpmap:111 opus/48000/2',
    'a=fmtp:111 minptime=10',
    'm=video 9 x 96 97 98',
    'a=rtpmap:96 VP8/90000',
    'a=rtpmap:97 rtx/90000',
    'a=fmtp:97 apt=96',
    'a=rtpmap:98 VP9/90000',
    'a=fmtp:98 profile-id=0',
  );
  expect(withStartBitrate(answer, 2500)).toBe(
    sdp(
      'v=0',
      'm=audio 9 x 111',
      'a=rtpmap:111 opus/48000/2',
      'a=fmtp:111 minptime=10',
      'm=video 9 x 96 97 98',
      'a=rtpmap:96 VP8/90000',
      'a=fmtp:96 x-google-start-bitrate=2500',
      'a=rtpmap:97 rtx/90000',
      'a=fmtp:97 apt=96',
      'a=rtpmap:98 VP9/90000',
      'a=fmtp:98 profile-id=0;x-google-start-bitrate=2500',
    ),
  );
  expect(withStartBitrate(withStartBitrate(answer, 1), 2)).toBe(withStartBitrate(answer, 1));
});

describe('signal helpers', () => {
  test('server ids carry their prefixes', () => {
    expect(newSid('PA_')).toMatch(/^PA_[A-Za-z0-9]{12}$/);
    expect(newSid('TR_')).not.toBe(newSid('TR_'));
  });

  test('decodes plain and gzip join requests', () => {
    const join = new JoinRequest({ reconnect: true, participantSid: 'PA_x', connectionSettings: { autoSubscribe: false } });
    for (const gzip of [false, true]) {
      const bytes = join.toBinary();
      const wrapped = new WrappedJoinRequest({
        compression: gzip ? WrappedJoinRequest_Compression.GZIP : WrappedJoinRequest_Compression.NONE,
        joinRequest: gzip ? gzipSync(bytes) : bytes,
      });
      const param = Buffer.from(wrapped.toBinary()).toString('base64url');
      expect(decodeJoinRequest(param).participantSid).toBe('PA_x');
      const url = new URL(`http://x/rtc/v1?join_request=${param}`);
      expect(parseJoinParams(url, 'v1')).toMatchObject({ path: 'v1', reconnect: true, autoSubscribe: false });
    }
    expect(() => decodeJoinRequest('////')).toThrow();
    expect(parseJoinParams(new URL('http://x/rtc?reconnect=1&auto_subscribe=0'), 'v0')).toEqual({
      path: 'v0',
      reconnect: true,
      autoSubscribe: false,
    });
  });

  test('candidates: strict JSON out, tolerant parse in, no end-of-candidates', () => {
    const c = { candidate: 'candidate:1 1 udp 1 127.0.0.1 5000 typ host', sdpMid: null, sdpMLineIndex: null } as RTCIceCandidate;
    expect(JSON.parse(candidateToJson(c, '0')!)).toEqual({ candidate: c.candidate, sdpMid: '0', sdpMLineIndex: 0 });
    expect(candidateToJson(null, '0')).toBeUndefined();
    expect(candidateToJson({ ...c, candidate: '' } as RTCIceCandidate, '0')).toBeUndefined();
    expect(parseCandidate('{"candidate":"candidate:x","sdpMid":"0","sdpMLineIndex":0}')).toEqual({
      candidate: 'candidate:x',
      sdpMid: '0',
      sdpMLineIndex: 0,
    });
    expect(parseCandidate('{"candidate":""}')).toBeUndefined();
    expect(parseCandidate('nope')).toBeUndefined();
    expect(parseCandidate('null')).toBeUndefined();
  });
});

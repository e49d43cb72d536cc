import { offerProblem } from '../../src/gateway/ingest/sdp';
import { offerShapeProblem, offeredVideo, orList, sentVideoCodecs, syntheticOffer, undecodableVideo } from '../../src/lib/sdp';

const offer = (video: string[], extra: string[] = []) =>
  ['v=0', 'o=- 1 2 IN IP4 127.0.0.1', 's=-', 't=0 0', 'a=group:BUNDLE 0', ...extra, ...video, ''].join('\r\n');

const videoSection = (codecs: [number, string][], direction = 'sendonly', port = 9) => [
  `m=video ${port} UDP/TLS/RTP/SAVPF ${codecs.map(([pt]) => pt).join(' ')}`,
  'c=IN IP4 0.0.0.0',
  'a=mid:0',
  `a=${direction}`,
  ...codecs.flatMap(([pt, name]) => [`a=rtpmap:${pt} ${name}/90000`, `a=rtcp-fb:${pt} nack`]),
];

const audio = ['m=audio 9 UDP/TLS/RTP/SAVPF 111', 'a=mid:1', 'a=sendrecv', 'a=rtpmap:111 opus/48000/2'];

describe('offeredVideo', () => {
  test('lists media codecs per video section, auxiliary payloads left out, AV1X read as AV1', () => {
    const sdp = offer(
      videoSection([
        [96, 'VP8'],
        [97, 'rtx'],
        [102, 'H264'],
        [39, 'AV1X'],
        [125, 'red'],
        [127, 'ulpfec'],
      ]),
      audio,
    );
    expect(offeredVideo(sdp)).toEqual([{ codecs: ['VP8', 'H264', 'AV1'], sending: true, accepted: true }]);
    expect(sentVideoCodecs(sdp)).toEqual(['VP8', 'H264', 'AV1']);
  });

  test('direction and rejected sections decide whether the client sends; a rejected section is not accepted', () => {
    expect(offeredVideo(offer(videoSection([[96, 'VP8']], 'recvonly')))).toEqual([{ codecs: ['VP8'], sending: false, accepted: true }]);
    expect(offeredVideo(offer(videoSection([[96, 'VP8']], 'sendrecv', 0)))).toEqual([{ codecs: ['VP8'], sending: false, accepted: false }]);
    expect(offeredVideo('hello')).toBeNull();
  });
});

describe('offerShapeProblem: what any room needs of a publisher offer', () => {
  test.each([
    [offer(videoSection([[102, 'H264']])), null],
    [offer(videoSection([[96, 'VP8']], 'inactive')), /sends no video/],
    [offer([], audio), /no video section/],
    ['not sdp at all', /not an SDP/],
  ])('%#', (sdp, expected) => {
    const problem = offerShapeProblem(sdp);
    if (expected === null) expect(problem).toBeNull();
    else expect(problem).toMatch(expected);
  });
});

describe("offerProblem: the relay's own decoders (VP8, VP9, AV1)", () => {
  test.each([
    [
      offer(
        videoSection([
          [96, 'VP8'],
          [97, 'rtx'],
        ]),
      ),
      null,
    ],
    [
      offer(
        videoSection([
          [102, 'H264'],
          [98, 'VP9'],
        ]),
      ),
      null,
    ],
    [offer(videoSection([[39, 'AV1X']])), null],
    [
      offer(
        videoSection([
          [102, 'H264'],
          [103, 'rtx'],
          [104, 'H264'],
        ]),
      ),
      /codecs \(H264\) cannot be decoded by this service; offer VP8, VP9 or AV1/,
    ],
    [offer(videoSection([[96, 'VP8']], 'inactive')), /sends no video/],
    [offer([], audio), /no video section/],
    ['not sdp at all', /not an SDP/],
  ])('%#', (sdp, expected) => {
    const problem = offerProblem(sdp);
    if (expected === null) expect(problem).toBeNull();
    else expect(problem).toMatch(expected);
  });

  test('the receiver is named as the caller says', () => {
    expect(undecodableVideo(offer(videoSection([[102, 'H264']])), ['VP8'], 'this room')).toBe(
      "the offer's video codecs (H264) cannot be decoded by this room; offer VP8",
    );
    expect(orList(['A', 'B', 'C'])).toBe('A, B or C');
  });
});

describe('syntheticOffer', () => {
  test('one sendonly VP8 video section with ICE credentials, a fingerprint and an msid; fresh each time', () => {
    const a = syntheticOffer({ trackId: 'cam' });
    expect(offerShapeProblem(a)).toBeNull();
    expect(offeredVideo(a)).toEqual([{ codecs: ['VP8'], sending: true, accepted: true }]);
    expect(a).toMatch(/^a=ice-ufrag:[0-9a-f]{8}\r$/m);
    expect(a).toMatch(/^a=fingerprint:sha-256 ([0-9A-F]{2}:){31}[0-9A-F]{2}\r$/m);
    expect(a).toMatch(/^a=msid:\S+ cam\r$/m);
    expect(a.endsWith('\r\n')).toBe(true);
    expect(syntheticOffer()).not.toBe(syntheticOffer());
  });
});

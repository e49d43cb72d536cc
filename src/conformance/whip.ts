/**
 * Whether the upstream's room takes a WHIP publisher (RFC 9725), as the gateway's webrtc legacy
 * streams need with `legacy.webrtc.mode: whip` (the default): a synthetic offer (no media stack,
 * never connects) is posted to `<publish url>/whip/v1` with the stream's publish token, the answer
 * read, and the session deleted at once.
 */
import { offeredVideo, syntheticOffer } from '../lib/sdp';
import { WhipError, endWhip, publishWhip, whipEndpoint } from '../lib/whip';
import { problem } from './shapes';
import type { Finding } from './verdicts';

const TIMEOUT_MS = 10_000;

export async function whipVerdict(publishUrl: string, token: string, signal?: AbortSignal): Promise<Finding> {
  let endpoint: string;
  try {
    endpoint = whipEndpoint(publishUrl);
  } catch (err) {
    return { problems: [`publish.url ${JSON.stringify(publishUrl)} is no room URL: ${(err as Error).message}`] };
  }
  let session;
  try {
    session = await publishWhip(endpoint, syntheticOffer({ trackId: 'conformance' }), { token, timeoutMs: TIMEOUT_MS, signal });
  } catch (err) {
    if (!(err instanceof WhipError)) throw err;
    const hint = err.failure === 'unsupported' ? ': this room has no WHIP endpoint; run the gateway with legacy.webrtc.mode "relay"' : '';
    return { problems: [`POST ${endpoint}: ${err.message}${hint}`] };
  }
  const candidates = session.answerSdp.split(/\r?\n/).filter((l) => l.startsWith('a=candidate:')).length;
  const problems = [
    ...problem(
      (offeredVideo(session.answerSdp) ?? []).some((v) => v.accepted),
      'the answer accepts no video section',
    ),
    ...problem(candidates > 0, 'the answer carries no candidate: legacy clients never trickle, so they could not connect'),
  ];
  let ended: boolean;
  try {
    ended = await endWhip(session.resource, { token, timeoutMs: TIMEOUT_MS, signal });
  } catch (err) {
    if (!(err instanceof WhipError)) throw err;
    return { problems: [...problems, `DELETE ${session.resource}: ${err.message}`] };
  }
  problems.push(...problem(ended, `DELETE ${session.resource} answered 404: the session was gone already`));
  return {
    problems,
    detail: `answer with ${candidates} candidates, ${session.iceServers.length} ICE servers${session.etag ? ', ETag' : ''}; session deleted`,
  };
}

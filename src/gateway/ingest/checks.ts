/**
 * Source checks a create must pass before any media is set up, as legacy 422s: an offer with video
 * we can decode, a customer room URL we can dial, a room token that may still subscribe.
 */
import type { ServiceError } from '../../lib/errors';
import { legacyValidationError } from '../legacy';
import type { StreamSpec } from '../legacy';
import { checkRoomToken, roomUrlProblem } from './room-token';
import { offerProblem } from './sdp';

/** The join takes a moment: a token must stay valid at least this long after the check. */
const TOKEN_MIN_VALIDITY_MS = 5000;

const invalid = (spec: StreamSpec, loc: string[], msg: string): ServiceError =>
  legacyValidationError([{ loc: ['body', ...loc], msg, type: 'value_error' }], spec.requestId, msg);

/** The 422 this spec's source deserves, or null when it can be relayed (native: always null). */
export function sourceProblem(spec: StreamSpec, nowMs: number = Date.now()): ServiceError | null {
  const source = spec.source;
  if (source.transport === 'webrtc') {
    const problem = offerProblem(source.sdp);
    const field = spec.deprecatedFields.includes('webrtc') ? ['webrtc', 'sdp'] : ['source', 'sdp'];
    return problem ? invalid(spec, field, problem) : null;
  }
  if (source.transport === 'room') {
    const urlProblem = roomUrlProblem(source.url);
    if (urlProblem) return invalid(spec, ['source', 'url'], urlProblem);
    const token = checkRoomToken(source.token, nowMs, TOKEN_MIN_VALIDITY_MS);
    return token.ok ? null : invalid(spec, ['source', 'token'], token.problem);
  }
  return null;
}

/** Throws the 422 of `sourceProblem`. */
export function checkSource(spec: StreamSpec, nowMs: number = Date.now()): void {
  const problem = sourceProblem(spec, nowMs);
  if (problem) throw problem;
}

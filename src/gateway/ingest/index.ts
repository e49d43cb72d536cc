export { IngestRelay } from './relay';
export type { IngestRelayOptions, IngestStats } from './relay';
export { checkSource, sourceProblem } from './checks';
export { FrameSampler, relayFps } from './rate';
export { checkRoomToken, roomUrlProblem } from './room-token';
export { offerProblem, DECODABLE_VIDEO_CODECS } from './sdp';

export { MediaRoomServer } from './server';
export type { MediaRoomOptions, RoomFrameSink, RoomStats } from './types';
export type { ServerVideo, ServerVideoOptions } from './server-video';
export { mintPublishToken, mintSubscribeToken, verifyRoomToken } from './tokens';
export type { RoomKeys } from './tokens';

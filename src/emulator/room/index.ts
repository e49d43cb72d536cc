export { MediaRoomServer } from './server';
export type { MediaRoomOptions, RoomFrameSink, RoomStats } from './types';
export { mintPublishToken, mintSubscribeToken, verifyRoomToken } from './tokens';
export type { RoomKeys } from './tokens';

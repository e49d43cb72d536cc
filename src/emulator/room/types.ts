import type { RawFrame } from '../frames/types';
import type { Logger } from '../../lib/logger';
import type { FaultSpec } from '../faults';
import type { RoomKeys } from './tokens';
import type { WhipTiming } from './whip-participant';
import type { WhipIceServer } from './whip-routes';

/** Where a room's decoded frames go (the stream's frame buffer). */
export interface RoomFrameSink {
  /** Called on wrtc's frame callback: keep it quick; `raw.data` is not reused by wrtc. */
  onFrame(raw: RawFrame): void;
  /** A real publisher's video publication started in the room. */
  onPublication?(): void;
}

export interface MediaRoomOptions {
  /** apiKey/apiSecret the room JWTs are verified with. */
  keys: RoomKeys;
  logger: Logger;
  /** Returns the sink for a room (room name = stream id) or undefined when the stream does not exist / has ended → refuse the join. */
  resolveRoom(room: string): RoomFrameSink | undefined;
  /** Sent in the join response; clients ping this often (default 5). */
  pingIntervalSeconds?: number;
  /** Silence after which either side gives up on the other (default 15). */
  pingTimeoutSeconds?: number;
  /** WHIP publishing at /whip/v1 (on unless `enabled` is false). */
  whip?: {
    enabled?: boolean;
    /** Named to clients in `Link: <url>; rel="ice-server"` headers (the room's own peers use none). */
    iceServers?: WhipIceServer[];
    /** The publisher's timeline (tests shorten it). */
    timing?: Partial<WhipTiming>;
    /** The fault armed for the next POST (`/_emulator/whip/faults`). */
    takeFault?: () => FaultSpec | undefined;
  };
}

export interface RoomStats {
  /** 1 while a participant holds the publisher slot. */
  publishers: number;
  /** Connected participants, other than the publisher, allowed to subscribe. */
  subscribers: number;
  /** Decoded frames received since the room was created. */
  framesIn: number;
  /** Size of the last decoded frame (0 before the first). */
  width: number;
  height: number;
  /** The live video publication: its participant's identity, the track's sid and name (null: none). */
  publication: { identity: string; trackSid: string; trackName: string } | null;
}

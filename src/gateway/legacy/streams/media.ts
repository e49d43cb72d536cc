/**
 * A stream's media through its source (./ports.ts `StreamSource`): set up at create, taken over at
 * adoption, its publish token renewed, its outside session kept in the record and released at the
 * stream's end on whichever replica ends it. The one place the streams touch media; which source
 * a stream has is its spec's transport, never a branch here.
 */
import { transportLostReason } from '../contract/closes';
import type { LegacyMedia } from '../contract/responses';
import type { LiveStream } from './live-stream';
import { legacyRecord } from './ownership';
import type { MediaSessionRef, StreamsContext, SourceContext, StreamSource } from './ports';
import type { RecordSync } from './record-sync';
import type { StreamRecord, StoredMediaSession } from '../../store/store';

/** The record's form of a session: the token sealed when the fleet shares its store. */
function storedSession(deps: Pick<StreamsContext, 'fleet'>, streamId: string, session: MediaSessionRef, token: string): StoredMediaSession {
  const sealer = deps.fleet.sealer;
  return { ...session, token: sealer ? sealer.seal(token, streamId) : token };
}

/** The publish token of a stored session (undefined when it does not open here). */
function sessionToken(deps: Pick<StreamsContext, 'fleet'>, streamId: string, stored: StoredMediaSession): string | undefined {
  const sealer = deps.fleet.sealer;
  return sealer ? sealer.open(stored.token, streamId) : stored.token;
}

export class StreamMedia {
  constructor(
    private readonly deps: StreamsContext,
    /** The end path (a lost source ends its stream). */
    private readonly end: (streamId: string, reason: string) => Promise<unknown>,
    private readonly sync: RecordSync,
  ) {}

  sourceOf(stream: Pick<LiveStream, 'record'>): StreamSource {
    return this.deps.sources.of(stream.record.spec.transport);
  }

  /** What a source is given for `stream`; `publish` says where and with which token it publishes. */
  private context(stream: LiveStream, publish: SourceContext['publish']): SourceContext {
    const { spec, streamId, ids } = stream.record;
    const { upstream, brand } = this.deps;
    return {
      spec,
      streamId,
      onLost: () => {
        if (spec.transport !== 'native') void this.end(streamId, transportLostReason(spec.transport, brand));
      },
      onFrameSize: (width, height) => this.sync.frameSize(streamId, width, height),
      publish,
      readUpstream: () => upstream.getStream(stream.apiKey, streamId, { signal: stream.signal, ...ids }),
    };
  }

  /**
   * Sets a new stream's media up with the create's publish URL and token; a session outside this
   * process goes into the record. Throws what the source threw (the caller ends the stream), after
   * releasing a session the record could not take.
   */
  async start(stream: LiveStream, publish: { url: string; token: string }): Promise<LegacyMedia> {
    const source = this.sourceOf(stream);
    const started = await source.start(this.context(stream, async () => publish));
    if (started.session) {
      try {
        const mediaSession = storedSession(this.deps, stream.id, started.session, publish.token);
        stream.holdMediaSession(mediaSession);
        await this.deps.store.updateRecord(stream.id, { mediaSession });
      } catch (err) {
        await source.release(started.session, publish.token, stream.id);
        throw err;
      }
    }
    return started.media;
  }

  /**
   * Takes an adopted stream's media over; its publish URL and a fresh token come from an upstream
   * keepalive, asked only if the source needs them. False when the media is lost (the stream ended).
   */
  async adopt(stream: LiveStream): Promise<boolean> {
    const { upstream, logger, brand } = this.deps;
    const { record } = stream;
    const publish = async () => {
      const ka = await upstream.keepalive(stream.apiKey, record.streamId, record.ids);
      stream.renewToken(ka.publish.token);
      if (!ka.publish.url) throw new Error('the upstream keepalive named no publish url');
      return { url: ka.publish.url, token: ka.publish.token };
    };
    try {
      await this.sourceOf(stream).adopt(this.context(stream, publish));
      return true;
    } catch (err) {
      if (record.spec.transport === 'native') throw err;
      logger.warn({ err, streamId: record.streamId }, "could not take the stream's media over");
      await this.end(record.streamId, transportLostReason(record.spec.transport, brand));
      return false;
    }
  }

  /** A keepalive's fresh publish token, on any replica: the record's session keeps the latest. */
  async tokenRenewed(rec: StreamRecord, token: string): Promise<void> {
    if (!rec.mediaSession) return;
    await this.deps.store.updateRecord(rec.streamId, { mediaSession: storedSession(this.deps, rec.streamId, rec.mediaSession, token) });
  }
}

/**
 * The end of a stream's media outside this process (its WHIP session), from its record, on the
 * replica that won the end: best effort, with the latest token (a failure is logged; the upstream
 * stream's delete takes the room down anyway).
 */
export async function releaseMedia(deps: StreamsContext, rec: StreamRecord, heldToken?: string): Promise<void> {
  const stored = rec.mediaSession;
  if (!stored) return;
  const token = sessionToken(deps, rec.streamId, stored) ?? heldToken;
  if (!token) {
    deps.logger.warn(
      { streamId: rec.streamId },
      "the stream's media session token does not open here: left to the upstream stream's delete",
    );
    return;
  }
  const { token: _sealed, ...session } = stored;
  try {
    await deps.sources.of(legacyRecord(rec).spec.transport).release(session, token, rec.streamId);
  } catch (err) {
    deps.logger.warn(
      { err, streamId: rec.streamId },
      "the stream's media session could not be ended: left to the upstream stream's delete",
    );
  }
}

/**
 * The native source, and the sources of a gateway that has only it. A native stream's client
 * publishes straight into the upstream's room with the URL and token of the create response:
 * nothing of its media is here, so it moves with its stream and ends with nothing to release.
 * The other sources (webrtc over WHIP or the relay, customer rooms) are src/gateway/ingest's.
 */
import { LEGACY_ERRORS } from '../contract/errors';
import type { StreamSpec, Transport } from '../contract/spec';
import type { SourceContext, SourceStarted, StreamSource, StreamSources } from './ports';

export const nativeSource: StreamSource = {
  movable: true,
  check: () => undefined,
  async start(ctx: SourceContext): Promise<SourceStarted> {
    const { url, token } = await ctx.publish();
    return { media: { transport: 'native', url, token } };
  },
  adopt: async () => undefined,
  renewToken: () => undefined,
  stop: () => undefined,
  release: async () => undefined,
};

/** A transport this gateway has no source for: every create with it is refused (422 `unsupported_source`). */
function unsupported(transport: Transport): StreamSource {
  const refuse = (spec: StreamSpec): never => {
    throw LEGACY_ERRORS.unsupportedSource(spec.transport);
  };
  return {
    movable: true,
    check: refuse,
    start: async (ctx) => refuse(ctx.spec),
    adopt: async () => {
      throw LEGACY_ERRORS.unsupportedSource(transport);
    },
    renewToken: () => undefined,
    stop: () => undefined,
    release: async () => undefined,
  };
}

/** Native streams only (streams built without src/gateway/ingest: tests of the lifecycle). */
export function nativeOnlySources(): StreamSources {
  const webrtc = unsupported('webrtc');
  const room = unsupported('room');
  return {
    of: (transport) => (transport === 'native' ? nativeSource : transport === 'webrtc' ? webrtc : room),
    held: 0,
    close: async () => undefined,
  };
}

/**
 * The sources that run on the gateway's media relay (./relay.ts): a customer's room (the relay
 * subscribes there and republishes into the upstream's room; movable: a new owner re-joins the
 * customer's room with the token in the record) and webrtc in relay mode (the relay answers the
 * client's offer itself; pinned: the peer connection lives in its owner's process).
 */
import type { MediaRelay, StreamSpec, SourceContext, SourceStarted, StreamSource } from '../legacy';

export class RelaySource implements StreamSource {
  constructor(
    private readonly relay: MediaRelay,
    readonly movable: boolean,
  ) {}

  check(spec: StreamSpec): void {
    this.relay.check?.(spec);
  }

  async start(ctx: SourceContext): Promise<SourceStarted> {
    const { url, token } = await ctx.publish();
    const media = await this.relay.start({
      spec: ctx.spec,
      streamId: ctx.streamId,
      publishUrl: url,
      publishToken: token,
      onLost: () => ctx.onLost(),
      onFrameSize: ctx.onFrameSize && ((w, h) => ctx.onFrameSize?.(w, h)),
    });
    return { media };
  }

  /** A customer room is joined again from the new owner; a relayed peer connection cannot move. */
  async adopt(ctx: SourceContext): Promise<void> {
    if (!this.movable) throw new Error('a relayed webrtc peer connection cannot move to another replica');
    await this.start(ctx);
  }

  renewToken(streamId: string, token: string): void {
    this.relay.renewToken?.(streamId, token);
  }

  stop(streamId: string): Promise<void> | void {
    return this.relay.stop(streamId);
  }

  async release(): Promise<void> {
    // Nothing of a relayed stream outlives the relay's own stop.
  }
}

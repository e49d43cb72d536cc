/**
 * Page script for the published browser SDK (`@overshoot/sdk` 0.1.0-alpha.2, bundled as is with
 * esbuild at test time): starts `RealtimeVision` on the fake camera against a gateway base URL and
 * records every result and every error (with the page's clock) for the test to read through
 * `window.sdkTest`.
 */
import { RealtimeVision } from '@overshoot/sdk';

export interface SdkStartOptions {
  /** The SDK's `apiUrl`: the gateway's `/v0.2` base. */
  apiUrl: string;
  apiKey: string;
  prompt: string;
  model: string;
  /** The SDK's processing settings over its defaults (`fps` stays the camera's). */
  processing?: { clip_length_seconds?: number; delay_seconds?: number };
}

declare global {
  interface Window {
    sdkTest: {
      start(opts: SdkStartOptions): Promise<{ streamId: string | null; error?: string }>;
      /** Results so far: [result id, arrival (ms), prompt]. */
      results: [string, number, string][];
      errors: string[];
      active(): boolean;
      /** Video frames the SDK's peer connection has sent so far (its outbound-rtp stats). */
      framesSent(): Promise<number>;
      stop(): Promise<void>;
    };
  }
}

let vision: RealtimeVision | undefined;

window.sdkTest = {
  results: [],
  errors: [],
  async start(opts) {
    vision = new RealtimeVision({
      apiUrl: opts.apiUrl,
      apiKey: opts.apiKey,
      prompt: opts.prompt,
      model: opts.model,
      source: { type: 'camera', cameraFacing: 'environment' },
      processing: opts.processing,
      // Loopback only: no TURN server (the SDK's default is a public one).
      iceServers: [],
      onResult: (r) => void window.sdkTest.results.push([r.id, Date.now(), r.prompt]),
      onError: (e) => void window.sdkTest.errors.push(`${Date.now()} ${e.name}: ${e.message}`),
    });
    try {
      await vision.start();
      return { streamId: vision.getStreamId() };
    } catch (err) {
      return { streamId: null, error: (err as Error).message };
    }
  },
  active: () => vision?.isActive() ?? false,
  async framesSent() {
    // The SDK keeps its peer connection to itself: read it as the page's own code could.
    const pc = (vision as unknown as { peerConnection?: RTCPeerConnection } | undefined)?.peerConnection;
    let sent = 0;
    (await pc?.getStats())?.forEach((s: Record<string, unknown>) => {
      if (s.type === 'outbound-rtp' && s.kind === 'video') sent += Number(s.framesSent ?? 0);
    });
    return sent;
  },
  async stop() {
    await vision?.stop();
  },
};

/**
 * Browser side of the relay bench (bundled with esbuild at bench time, never loaded by Node): a
 * legacy webrtc client sending either Chromium's fake camera or a canvas painting the emulator's
 * index pattern, recording when each index was painted (the frame leaving the sender).
 */
import { DEFAULT_PATTERN_BACKGROUND, DEFAULT_PATTERN_BAR, barGeometry, patternBits } from '../src/emulator/frames/pattern';

export interface SenderOptions {
  source: 'camera' | 'pattern';
  width: number;
  height: number;
  fps: number;
}

declare global {
  interface Window {
    relayBench: {
      /** Offers, POSTs the legacy create, applies the answer; returns the status and stream id. */
      start(
        gateway: string,
        key: string,
        body: object,
        opts: SenderOptions,
      ): Promise<{ status: number; streamId?: string; error?: string }>;
      /** [index, painted at (Unix ms)] since the last call. */
      drainSent(): [number, number][];
      /** Frames the browser encoded and sent so far, and why its quality is limited (if it is). */
      outbound(): Promise<{ framesEncoded: number; framesSent: number; size: string; limitation: string }>;
      stop(): void;
    };
  }
}

const COLS = 16;
const ROWS = 12;
const CODE_ROWS = 5;
const rgb = (c: readonly number[]) => `rgb(${c[0]},${c[1]},${c[2]})`;

let pc: RTCPeerConnection | undefined;
let timer: number | undefined;
let sent: [number, number][] = [];
let stream: MediaStream | undefined;

/** Paints pattern frame `index` the way PatternRenderer does (code band, background, bar). */
function paint(ctx: CanvasRenderingContext2D, width: number, height: number, index: number): void {
  const col = (i: number) => Math.floor((i * width) / COLS);
  const row = (i: number) => Math.floor((i * height) / ROWS);
  const codeBottom = row(CODE_ROWS);
  ctx.fillStyle = rgb(DEFAULT_PATTERN_BACKGROUND);
  ctx.fillRect(0, codeBottom, width, height - codeBottom);
  const bits = patternBits(index);
  for (let r = 0; r < CODE_ROWS; r++) {
    for (let p = 0; p < COLS / 2; p++) {
      const bit = bits[r * (COLS / 2) + p];
      ctx.fillStyle = bit ? '#fff' : '#000';
      ctx.fillRect(col(2 * p), row(r), col(2 * p + 1) - col(2 * p), row(r + 1) - row(r));
      ctx.fillStyle = bit ? '#000' : '#fff';
      ctx.fillRect(col(2 * p + 1), row(r), col(2 * p + 2) - col(2 * p + 1), row(r + 1) - row(r));
    }
  }
  const bar = barGeometry(index, width);
  ctx.fillStyle = rgb(DEFAULT_PATTERN_BAR);
  ctx.fillRect(bar.x, codeBottom, bar.w, height - codeBottom);
}

async function media(opts: SenderOptions): Promise<MediaStream> {
  if (opts.source === 'camera') {
    return navigator.mediaDevices.getUserMedia({ video: { width: opts.width, height: opts.height, frameRate: opts.fps } });
  }
  const canvas = document.createElement('canvas');
  canvas.width = opts.width;
  canvas.height = opts.height;
  document.body.appendChild(canvas);
  const ctx = canvas.getContext('2d')!;
  const captured = canvas.captureStream(0);
  const track = captured.getVideoTracks()[0] as MediaStreamTrack & { requestFrame(): void };
  let index = 0;
  paint(ctx, opts.width, opts.height, index);
  timer = window.setInterval(() => {
    index += 1;
    const at = Date.now();
    paint(ctx, opts.width, opts.height, index);
    track.requestFrame();
    sent.push([index, at]);
  }, 1000 / opts.fps);
  return captured;
}

window.relayBench = {
  async start(gateway, key, body, opts) {
    stream = await media(opts);
    pc = new RTCPeerConnection({ iceServers: [] });
    for (const track of stream.getVideoTracks()) pc.addTrack(track, stream);
    await pc.setLocalDescription(await pc.createOffer());
    const res = await fetch(`${gateway}/v0.2/streams`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ ...body, source: { type: 'webrtc', sdp: pc.localDescription!.sdp } }),
    });
    const created = (await res.json()) as { stream_id?: string; webrtc?: RTCSessionDescriptionInit; message?: string };
    if (res.status !== 201) return { status: res.status, error: created.message };
    await pc.setRemoteDescription(created.webrtc!);
    return { status: res.status, streamId: created.stream_id };
  },
  drainSent() {
    const out = sent;
    sent = [];
    return out;
  },
  async outbound() {
    const out = { framesEncoded: 0, framesSent: 0, size: '-', limitation: 'none' };
    (await pc?.getStats())?.forEach((s: Record<string, unknown>) => {
      if (s.type !== 'outbound-rtp' || s.kind !== 'video') return;
      out.framesEncoded += Number(s.framesEncoded ?? 0);
      out.framesSent += Number(s.framesSent ?? 0);
      out.size = `${String(s.frameWidth)}x${String(s.frameHeight)}`;
      out.limitation = String(s.qualityLimitationReason ?? 'none');
    });
    return out;
  },
  stop() {
    window.clearInterval(timer);
    pc?.close();
    stream?.getTracks().forEach((t) => t.stop());
  },
};

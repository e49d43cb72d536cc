/**
 * Fault injection for completions, driven by the control API (`/_emulator/faults`), in the spirit
 * of livekit server-sdk's mock header: a test arms a fault, the next matching requests take it.
 */
export interface FaultSpec {
  /** Model id the fault applies to; `*` for any. */
  model: string;
  /** How many requests take it; decremented per match. */
  count: number;
  /** Answer with this status and the contract's error body… */
  status?: number;
  code?: string;
  message?: string;
  /** `detail.error.type` (default: `rate_limit_error` for 429, `upstream_error` for `upstream_*` codes, else `stream_error`). */
  type?: string;
  /** …or destroy the connection without answering. */
  reset?: boolean;
  /** Extra latency before answering (also combinable with status). */
  latencyMs?: number;
  /** Seconds for a `retry-after` header on a status fault. */
  retryAfterSeconds?: number;
}

export class FaultInjector {
  private faults: FaultSpec[] = [];

  add(spec: FaultSpec): void {
    this.faults.push({ ...spec });
  }

  /** Takes the first armed fault matching the model, if any. */
  take(model: string): FaultSpec | undefined {
    const i = this.faults.findIndex((f) => f.count > 0 && (f.model === '*' || f.model === model));
    if (i < 0) return undefined;
    const f = this.faults[i]!;
    f.count -= 1;
    if (f.count <= 0) this.faults.splice(i, 1);
    return { ...f };
  }

  list(): FaultSpec[] {
    return this.faults.map((f) => ({ ...f }));
  }

  clear(): void {
    this.faults = [];
  }
}

import type { Registry } from 'prom-client';

/** One label combination's observations: per-bucket counts (not cumulative), sum, count. */
interface Series {
  readonly labels: Record<string, string>;
  readonly counts: Float64Array;
  sum: number;
  count: number;
}

/** What `labels(...)` hands out: keep it, observing costs a bucket search and three additions. */
export interface HistogramChild {
  observe(value: number): void;
}

interface SampleValue {
  labels: Record<string, string | number>;
  value: number;
  metricName: string;
}

/**
 * A Prometheus histogram for per-request hot paths, exposed through a prom-client `Registry` with
 * the same text as prom-client's `Histogram`. prom-client validates, hashes and allocates on every
 * `observe`, even through a label child (about 1.3 µs; two per proxied request were the largest
 * single item of the passthrough's own cost). Here a child owns its series, so `observe` is a
 * bucket search and three additions; the work of exposition is done when it is scraped.
 */
export class BucketHistogram<L extends string = string> {
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  private readonly upperBounds: readonly number[];
  private readonly series = new Map<string, Series>();

  constructor(
    readonly name: string,
    readonly help: string,
    private readonly labelNames: readonly L[],
    buckets: readonly number[],
    registry: Registry,
  ) {
    this.upperBounds = [...buckets].sort((a, b) => a - b);
    // prom-client accepts any object with name, help, type and get() (the Metric shape it reads).
    registry.registerMetric(this as unknown as Parameters<Registry['registerMetric']>[0]);
  }

  /** The child of one label combination, values in `labelNames` order (created on first use). */
  labels(...values: string[]): HistogramChild {
    if (values.length !== this.labelNames.length) {
      throw new Error(`${this.name}: ${values.length} label values for labels ${this.labelNames.join(', ')}`);
    }
    const key = values.join('\u0000');
    let s = this.series.get(key);
    if (!s) {
      const labels: Record<string, string> = {};
      this.labelNames.forEach((n, i) => (labels[n] = values[i]!));
      s = { labels, counts: new Float64Array(this.upperBounds.length), sum: 0, count: 0 };
      this.series.set(key, s);
    }
    const series = s;
    const bounds = this.upperBounds;
    return {
      observe(value: number) {
        if (!Number.isFinite(value)) return; // a bad clock reading must not poison the sum
        series.sum += value;
        series.count += 1;
        // Linear search: latencies land in the first few buckets.
        for (let i = 0; i < bounds.length; i++) {
          if (value <= bounds[i]!) {
            series.counts[i]! += 1;
            return;
          }
        }
      },
    };
  }

  /** Drops every series (prom-client's `Registry.resetMetrics`). */
  reset(): void {
    this.series.clear();
  }

  /** The samples as prom-client's `Histogram.get()` gives them: cumulative buckets, +Inf, sum, count. */
  get(): { name: string; help: string; type: string; aggregator: string; values: SampleValue[] } {
    const values: SampleValue[] = [];
    const bucket = `${this.name}_bucket`;
    for (const s of this.series.values()) {
      let acc = 0;
      this.upperBounds.forEach((le, i) => {
        acc += s.counts[i]!;
        values.push({ labels: { le, ...s.labels }, value: acc, metricName: bucket });
      });
      values.push({ labels: { le: '+Inf', ...s.labels }, value: s.count, metricName: bucket });
      values.push({ labels: { ...s.labels }, value: s.sum, metricName: `${this.name}_sum` });
      values.push({ labels: { ...s.labels }, value: s.count, metricName: `${this.name}_count` });
    }
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }
}

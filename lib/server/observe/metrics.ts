/**
 * A small metrics registry rendered in the Prometheus text exposition
 * format (version 0.0.4): counters and histograms that code updates, and
 * gauges read when scraped (derived from live state, never stored).
 *
 * @module
 */

/** Label values of one series, by label name. */
export type Labels = Readonly<Record<string, string>>;

function escapeLabel(value: string): string {
  return value.replaceAll("\\", "\\\\").replaceAll("\n", "\\n").replaceAll('"', '\\"');
}

function labelText(labels: Labels, extra?: [string, string]): string {
  const pairs = Object.entries(labels);
  if (extra) pairs.push(extra);
  if (pairs.length === 0) return "";
  return `{${pairs.map(([k, v]) => `${k}="${escapeLabel(v)}"`).join(",")}}`;
}

const SERIES_KEYS = new WeakMap<Labels, string>();

/** The labels of an unlabelled series: one object, so its key is rendered once too. */
const NO_LABELS: Labels = Object.freeze({});

/** The series key of a labels object, rendered once per object (callers reuse their labels). */
function seriesKey(labels: Labels): string {
  let key = SERIES_KEYS.get(labels);
  if (key === undefined) {
    key = labelText(labels);
    SERIES_KEYS.set(labels, key);
  }
  return key;
}

function numberText(value: number): string {
  if (value === Infinity) return "+Inf";
  if (value === -Infinity) return "-Inf";
  return Number.isNaN(value) ? "NaN" : String(value);
}

/** Something the registry renders. */
export interface Metric {
  /** The metric's name. */
  readonly name: string;
  /** The lines of its exposition (`# HELP`, `# TYPE` and its samples). */
  render(): string[];
}

/** A monotonically increasing count, optionally split by labels. */
export class Counter implements Metric {
  readonly name: string;
  readonly #help: string;
  readonly #series = new Map<string, { labels: Labels; value: number }>();

  /**
   * Creates a counter.
   *
   * @param name Its name (ends in `_total`).
   * @param help One line saying what it counts.
   */
  constructor(name: string, help: string) {
    this.name = name;
    this.#help = help;
  }

  /**
   * Adds to the count of one series.
   *
   * @param amount A non-negative amount.
   * @param labels The series' labels.
   */
  inc(amount = 1, labels: Labels = NO_LABELS): void {
    if (!(amount >= 0)) throw new RangeError(`counter ${this.name} cannot decrease`);
    const key = seriesKey(labels);
    const series = this.#series.get(key);
    if (series) series.value += amount;
    else this.#series.set(key, { labels, value: amount });
  }

  /**
   * The current count of one series.
   *
   * @param labels The series' labels.
   */
  value(labels: Labels = NO_LABELS): number {
    return this.#series.get(seriesKey(labels))?.value ?? 0;
  }

  render(): string[] {
    const lines = [`# HELP ${this.name} ${this.#help}`, `# TYPE ${this.name} counter`];
    if (this.#series.size === 0) lines.push(`${this.name} 0`);
    for (const [key, series] of this.#series) {
      lines.push(`${this.name}${key} ${numberText(series.value)}`);
    }
    return lines;
  }
}

/** A value read when the metrics are scraped. */
export class Gauge implements Metric {
  readonly name: string;
  readonly #help: string;
  readonly #read: () => number;

  /**
   * Creates a gauge.
   *
   * @param name Its name.
   * @param help One line saying what it measures.
   * @param read Returns the current value.
   */
  constructor(name: string, help: string, read: () => number) {
    this.name = name;
    this.#help = help;
    this.#read = read;
  }

  render(): string[] {
    return [
      `# HELP ${this.name} ${this.#help}`,
      `# TYPE ${this.name} gauge`,
      `${this.name} ${numberText(this.#read())}`,
    ];
  }
}

/** Observations counted into cumulative buckets, with their sum and count. */
export class Histogram implements Metric {
  readonly name: string;
  readonly #help: string;
  readonly #bounds: readonly number[];
  readonly #series = new Map<string, { labels: Labels; counts: number[]; sum: number }>();

  /**
   * Creates a histogram.
   *
   * @param name Its name.
   * @param help One line saying what it measures.
   * @param bounds The buckets' upper bounds, ascending (`+Inf` is added).
   */
  constructor(name: string, help: string, bounds: readonly number[]) {
    this.name = name;
    this.#help = help;
    this.#bounds = bounds;
  }

  /**
   * Records one observation.
   *
   * @param value The observed value.
   * @param labels The series' labels.
   */
  observe(value: number, labels: Labels = NO_LABELS): void {
    const key = seriesKey(labels);
    let series = this.#series.get(key);
    if (!series) {
      series = { labels, counts: new Array(this.#bounds.length + 1).fill(0), sum: 0 };
      this.#series.set(key, series);
    }
    // A loop, not `findIndex` with a callback: every request is observed, mostly in V8's
    // interpreter.
    const bounds = this.#bounds;
    let bucket = 0;
    while (bucket < bounds.length && !(value <= bounds[bucket]!)) bucket++;
    series.counts[bucket]!++;
    series.sum += value;
  }

  render(): string[] {
    const lines = [`# HELP ${this.name} ${this.#help}`, `# TYPE ${this.name} histogram`];
    for (const series of this.#series.values()) {
      let cumulative = 0;
      [...this.#bounds, Infinity].forEach((bound, i) => {
        cumulative += series.counts[i]!;
        lines.push(
          `${this.name}_bucket${labelText(series.labels, ["le", numberText(bound)])} ${cumulative}`,
        );
      });
      lines.push(`${this.name}_sum${labelText(series.labels)} ${numberText(series.sum)}`);
      lines.push(`${this.name}_count${labelText(series.labels)} ${cumulative}`);
    }
    return lines;
  }
}

/**
 * Renders metrics in the Prometheus text format.
 *
 * @example
 * ```ts
 * import { Counter, Gauge, renderMetrics } from "./metrics.ts";
 * const hits = new Counter("hits_total", "Hits.");
 * hits.inc(2);
 * console.log(renderMetrics([hits, new Gauge("up", "Up.", () => 1)]));
 * // # HELP hits_total Hits.
 * // # TYPE hits_total counter
 * // hits_total 2
 * // # HELP up Up.
 * // # TYPE up gauge
 * // up 1
 * ```
 *
 * @param metrics The metrics, in order.
 * @returns The exposition, ending in a newline.
 */
export function renderMetrics(metrics: readonly Metric[]): string {
  return metrics.flatMap((metric) => metric.render()).join("\n") + "\n";
}

/**
 * Small statistics and formatting helpers for the benchmark report.
 *
 * @module
 */

/** min / median / max of a set of repetitions (NaN-free values only). */
export interface Summary {
  /** Smallest value. */
  min: number;
  /** Median (mean of the two middle values for an even count). */
  median: number;
  /** Largest value. */
  max: number;
  /** How many finite values went in. */
  count: number;
}

/**
 * Nearest-rank percentile of `values` (need not be sorted); `NaN` for an empty list.
 * @param values the samples
 * @param p the percentile, 0–100
 */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))]!;
}

/**
 * Summarizes repetitions, ignoring non-finite values (failed repetitions).
 * @param values one value per repetition
 */
export function summarize(values: readonly number[]): Summary {
  const ok = values.filter(Number.isFinite).sort((a, b) => a - b);
  if (ok.length === 0) return { min: NaN, median: NaN, max: NaN, count: 0 };
  const mid = ok.length >> 1;
  const median = ok.length % 2 === 1 ? ok[mid]! : (ok[mid - 1]! + ok[mid]!) / 2;
  return { min: ok[0]!, median, max: ok[ok.length - 1]!, count: ok.length };
}

/**
 * Formats a number with about three significant digits (integers above 1000 in full); "—" for
 * non-finite values.
 *
 * @param value the number
 */
export function formatNumber(value: number): string {
  if (!Number.isFinite(value)) return "—";
  const abs = Math.abs(value);
  if (abs >= 1000) return Math.round(value).toString();
  if (abs >= 100) return value.toFixed(0);
  if (abs >= 10) return value.toFixed(1);
  if (abs >= 1) return value.toFixed(2);
  if (abs === 0) return "0";
  return value.toPrecision(2);
}

/**
 * Renders a Markdown table.
 * @param header the column titles
 * @param rows the cells, row by row
 */
export function markdownTable(header: readonly string[], rows: readonly string[][]): string {
  const lines = [`| ${header.join(" | ")} |`, `| ${header.map(() => "---").join(" | ")} |`];
  for (const row of rows) lines.push(`| ${row.map((c) => c.replaceAll("|", "\\|")).join(" | ")} |`);
  return lines.join("\n");
}

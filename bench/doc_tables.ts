/**
 * Renders the tables of docs/benchmarks.md from a results file of `deno task bench`: the table
 * against the reference, the one against the floor and the host table, each in the document's
 * columns, and the count of targets met. Paste its output into the document and run `deno fmt`.
 *
 * ```sh
 * deno run --allow-read bench/doc_tables.ts bench/results/latest.json
 * ```
 *
 * @module
 */

import { LOAD_METRICS } from "./load.ts";
import { type MeasureDef, METRICS, type Target } from "./metrics.ts";
import { formatNumber, markdownTable } from "./stats.ts";

/**
 * A measure's summary as the results file holds it: `Summary`'s numbers (`stats.ts`), each null where
 * it was not a finite number (JSON has no NaN).
 */
export interface SummaryRecord {
  /** The measure's unit. */
  unit: string;
  /** Smallest value. */
  min: number | null;
  /** Median. */
  median: number | null;
  /** Largest value. */
  max: number | null;
}

/** One repetition's host record, as far as the tables use it. */
export interface HostRecord {
  /** The hypervisor's share of the cores' time, in %. */
  stealPct: number;
  /** The other processes' share, in %. */
  otherBusyPct?: number;
  /** The 1-minute load average at the start. */
  loadAvg1Start?: number;
  /** The same at the end. */
  loadAvg1End?: number;
}

/** One server of a results file. */
export interface ServerRecord {
  /** `us`, `reference` or `floor`. */
  label: string;
  /** Per metric, the measures' summaries and the repetitions. */
  metrics: Record<string, {
    measures: Record<string, SummaryRecord>;
    runs: { host?: HostRecord }[];
  }>;
}

/** One row of a comparison the bench made: its judgement of one measure's target. */
export interface ComparisonRecord {
  /** The metric's name. */
  metric: string;
  /** The measure's key (`serverCpuMs` for the metric's CPU total, which the tables leave out). */
  measure: string;
  /** Ours over the other server's medians; null when either is missing. */
  ratio: number | null;
  /** The worst repetition's ratio for the target's direction; null without a target. */
  worstRepetitionRatio: number | null;
  /** The target, if the measure has one for this comparison. */
  target: Target | null;
  /** Whether every repetition met it; null without a target or a judgeable repetition. */
  met: boolean | null;
}

/** The part of a `deno task bench` results file the tables are made of. */
export interface Results {
  /** The servers, `us` first. */
  servers: ServerRecord[];
  /** The bench's comparison with the reference (with the floor when there is no reference). */
  comparison: ComparisonRecord[] | null;
  /** The bench's comparison with the floor, when the run had both. */
  floorComparison?: ComparisonRecord[];
}

/**
 * A number as the document's tables show it: {@linkcode formatNumber}'s, except that below 1 it
 * keeps three significant digits (trailing zeros dropped); "—" for a missing value.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { cell } from "./doc_tables.ts";
 * assert.equal(cell(0.0497), "0.0497");
 * assert.equal(cell(0.140), "0.14");
 * assert.equal(cell(57), "57.0");
 * assert.equal(cell(69829.4), "69829");
 * assert.equal(cell(null), "—");
 * ```
 * @param value the number
 */
export function cell(value: number | null | undefined): string {
  // A results file holds a failed repetition's value as null (JSON has no NaN).
  const n = value ?? NaN;
  const small = Number.isFinite(n) && n !== 0 && Math.abs(n) < 1;
  return small ? n.toPrecision(3).replace(/0+$/, "") : formatNumber(n);
}

function spread(s: SummaryRecord | undefined): string {
  return `${cell(s?.median)} (${cell(s?.min)}–${cell(s?.max)})`;
}

/** The measures of every metric, by metric name and key. */
const MEASURES = new Map<string, MeasureDef>(
  [...METRICS, ...LOAD_METRICS].flatMap((metric) =>
    metric.measures.map((measure) => [`${metric.name}/${measure.key}`, measure] as const)
  ),
);

/** One table row per measure the bench compared: ours, `extra` servers' cells, its judgement. */
function rows(results: Results, comparison: ComparisonRecord[], extra: string[]): string[][] {
  const spreadOf = (label: string, row: ComparisonRecord) =>
    spread(
      results.servers.find((s) => s.label === label)?.metrics[row.metric]?.measures[row.measure],
    );
  const fixed = (x: number | null) => x === null ? "" : x.toFixed(2);
  return comparison.flatMap((row) => {
    const measure = MEASURES.get(`${row.metric}/${row.measure}`);
    if (measure === undefined) return []; // the metric's server CPU total
    return [[
      row.metric,
      measure.label,
      measure.unit,
      ...["us", ...extra].map((label) => spreadOf(label, row)),
      fixed(row.ratio) || "—",
      fixed(row.worstRepetitionRatio),
      row.target === null ? "" : `${row.target.op} ${row.target.ratio}`,
      row.met === null ? "" : row.met ? "yes" : "**no**",
    ]];
  });
}

function hostRows(results: Results): string[][] {
  const pct = (x: number | undefined) => x === undefined ? "—" : x.toFixed(1);
  const load = (x: number | undefined) => x === undefined ? "—" : x.toFixed(2);
  const rows: string[][] = [];
  for (const metric of [...METRICS, ...LOAD_METRICS]) {
    for (const server of results.servers) {
      const runs = server.metrics[metric.name]?.runs;
      if (runs === undefined) continue;
      rows.push([
        metric.name,
        server.label,
        runs.map((r) => pct(r.host?.stealPct)).join(" / "),
        runs.map((r) => pct(r.host?.otherBusyPct)).join(" / "),
        runs.map((r) => `${load(r.host?.loadAvg1Start)}→${load(r.host?.loadAvg1End)}`).join(" / "),
      ]);
    }
  }
  return rows;
}

/**
 * The document's tables for one results file, as Markdown: against the reference (with the
 * count of targets met), against the floor when the run had one, and the host table.
 *
 * @param results a parsed results file of `deno task bench --reference … [--floor …]`
 * @throws {Error} when the run had no reference server
 */
export function docTables(results: Results): string {
  const main = results.comparison ?? null;
  if (main === null || !results.servers.some((s) => s.label === "reference")) {
    throw new Error("the results have no reference server: run the bench with --reference");
  }
  const out: string[] = [];
  const targets = main.filter((row) =>
    row.met !== null && MEASURES.has(`${row.metric}/${row.measure}`)
  );
  const met = targets.filter((row) => row.met);
  out.push(`${met.length} of the ${targets.length} targets met in every repetition.\n`);
  out.push(markdownTable(
    [
      "metric",
      "measure",
      "unit",
      "us median (min–max)",
      "reference median (min–max)",
      "ratio",
      "worst rep.",
      "target",
      "met",
    ],
    rows(results, main, ["reference"]),
  ));
  if (results.floorComparison !== undefined) {
    out.push(
      "\n" + markdownTable(
        [
          "metric",
          "measure",
          "unit",
          "us",
          "floor",
          "reference",
          "us / floor",
          "worst rep.",
          "target",
          "met",
        ],
        rows(results, results.floorComparison, ["floor", "reference"]),
      ),
    );
  }
  out.push(
    "\n" + markdownTable(
      [
        "metric",
        "server",
        "steal % per rep",
        "other busy % per rep",
        "load average (1 min) per rep",
      ],
      hostRows(results),
    ),
  );
  return out.join("\n");
}

if (import.meta.main) {
  const path = Deno.args[0];
  if (path === undefined) {
    console.error("usage: deno run --allow-read bench/doc_tables.ts <results.json>");
    Deno.exit(2);
  }
  console.log(docTables(JSON.parse(await Deno.readTextFile(path)) as Results));
}

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
    runs: { values: Record<string, number | null>; host?: HostRecord }[];
  }>;
}

/** The part of a `deno task bench` results file the tables are made of. */
export interface Results {
  /** The servers, `us` first. */
  servers: ServerRecord[];
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

function meets(ratio: number, target: Target): boolean {
  return target.op === "<=" ? ratio <= target.ratio : ratio >= target.ratio;
}

/** The worst repetition's ratio for the target's direction; NaN when a repetition is missing. */
function worst(
  ours: ServerRecord,
  theirs: ServerRecord,
  metric: string,
  key: string,
  target: Target,
): number {
  const a = ours.metrics[metric]?.runs ?? [];
  const b = theirs.metrics[metric]?.runs ?? [];
  const ratios = a.slice(0, b.length).map((run, i) =>
    (run.values[key] ?? NaN) / (b[i]!.values[key] ?? NaN) // null (not a number) becomes NaN
  );
  if (ratios.length === 0 || !ratios.every(Number.isFinite)) return NaN;
  return target.op === "<=" ? Math.max(...ratios) : Math.min(...ratios);
}

/** One row of a comparison: the cells and whether its target was met (undefined: none). */
interface Row {
  cells: string[];
  met?: boolean;
}

function compare(
  results: Results,
  against: string,
  targetOf: (measure: MeasureDef) => Target | undefined,
  extra: string[],
): Row[] {
  const server = (label: string) => results.servers.find((s) => s.label === label);
  const us = server("us")!;
  const other = server(against)!;
  const rows: Row[] = [];
  for (const metric of [...METRICS, ...LOAD_METRICS]) {
    if (us.metrics[metric.name] === undefined) continue;
    for (const measure of metric.measures) {
      const summary = (s: ServerRecord | undefined) =>
        s?.metrics[metric.name]?.measures[measure.key];
      const a = summary(us);
      const b = summary(other);
      const ratio = (a?.median ?? NaN) / (b?.median ?? NaN);
      const target = targetOf(measure);
      const bad = target === undefined ? NaN : worst(us, other, metric.name, measure.key, target);
      const met = target === undefined || !Number.isFinite(bad) ? undefined : meets(bad, target);
      rows.push({
        met,
        cells: [
          metric.name,
          measure.label,
          measure.unit,
          spread(a),
          ...extra.map((label) => spread(summary(server(label)))),
          Number.isFinite(ratio) ? ratio.toFixed(2) : "—",
          Number.isFinite(bad) ? bad.toFixed(2) : "",
          target === undefined ? "" : `${target.op} ${target.ratio}`,
          met === undefined ? "" : met ? "yes" : "**no**",
        ],
      });
    }
  }
  return rows;
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
  if (!results.servers.some((s) => s.label === "reference")) {
    throw new Error("the results have no reference server: run the bench with --reference");
  }
  const out: string[] = [];
  const main = compare(results, "reference", (m) => m.target, ["reference"]);
  const targets = main.filter((row) => row.met !== undefined);
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
    main.map((row) => row.cells),
  ));
  if (results.servers.some((s) => s.label === "floor")) {
    const floor = compare(results, "floor", (m) => m.floorTarget, ["floor", "reference"]);
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
        floor.map((row) => row.cells),
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

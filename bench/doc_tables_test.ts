import assert from "node:assert/strict";
import { type ComparisonRecord, docTables, type Results, type ServerRecord } from "./doc_tables.ts";

/** A server whose `spawn` sequential p50 summary is `[min, median, max]` ms. */
function server(label: string, [min, median, max]: (number | null)[]): ServerRecord {
  const host = { stealPct: 0, otherBusyPct: 2.5, loadAvg1Start: 1, loadAvg1End: 1.5 };
  return {
    label,
    metrics: {
      spawn: {
        measures: { seqP50Ms: { unit: "ms", min: min!, median: median!, max: max! } },
        runs: [{ host }, { host }, { host }],
      },
    },
  };
}

/** The bench's judgement of spawn's p50, and the metric's server CPU total row it also writes. */
function judged(row: Partial<ComparisonRecord>): ComparisonRecord[] {
  const base = {
    metric: "spawn",
    ratio: null,
    worstRepetitionRatio: null,
    target: null,
    met: null,
  };
  return [{ ...base, measure: "seqP50Ms", ...row }, { ...base, measure: "serverCpuMs", ratio: 1 }];
}

function line(tables: string, start: string): string {
  return tables.split("\n").find((l) => l.startsWith(start)) ?? "";
}

Deno.test("docTables renders the bench's judgement of each target and counts the met ones", () => {
  const results: Results = {
    servers: [server("us", [6, 6.4, 42]), server("reference", [60, 60, 64])],
    comparison: judged({
      ratio: 0.1067,
      worstRepetitionRatio: 0.7,
      target: { op: "<=", ratio: 0.6 },
      met: false,
    }),
  };
  const tables = docTables(results);
  assert.match(tables, /^0 of the 1 targets met/);
  assert.equal(
    line(tables, "| spawn | sequential p50"),
    "| spawn | sequential p50 | ms | 6.40 (6.00–42.0) | 60.0 (60.0–64.0) | 0.11 | 0.70 | <= 0.6 | **no** |",
  );
  assert.ok(!tables.includes("serverCpuMs") && !tables.includes("| spawn | server CPU"), tables);
  assert.equal(
    line(tables, "| spawn | us |"),
    "| spawn | us | 0.0 / 0.0 / 0.0 | 2.5 / 2.5 / 2.5 | 1.00→1.50 / 1.00→1.50 / 1.00→1.50 |",
  );
});

Deno.test("docTables renders the floor table with the three servers when the run had a floor", () => {
  const results: Results = {
    servers: [
      server("us", [6, 6, 6]),
      server("reference", [60, 60, 60]),
      server("floor", [3, 3, 3]),
    ],
    comparison: judged({
      ratio: 0.1,
      worstRepetitionRatio: 0.1,
      target: { op: "<=", ratio: 0.6 },
      met: true,
    }),
    floorComparison: judged({ ratio: 2 }),
  };
  const tables = docTables(results);
  assert.match(tables, /^1 of the 1 targets met/);
  assert.equal(
    line(tables, "| spawn | sequential p50 | ms | 6.00 (6.00–6.00) | 3.00"),
    "| spawn | sequential p50 | ms | 6.00 (6.00–6.00) | 3.00 (3.00–3.00) | 60.0 (60.0–60.0) | 2.00 |  |  |  |",
  );
});

Deno.test("docTables shows a value the results file holds as null as missing, never as zero", () => {
  const results: Results = {
    servers: [server("us", [6, null, 6]), server("reference", [60, 60, 60])],
    // No repetition could be judged: the bench wrote no verdict, so the target is not counted.
    comparison: judged({ target: { op: "<=", ratio: 0.6 } }),
  };
  const tables = docTables(results);
  assert.match(tables, /^0 of the 0 targets met/);
  assert.equal(
    line(tables, "| spawn | sequential p50"),
    "| spawn | sequential p50 | ms | — (6.00–6.00) | 60.0 (60.0–60.0) | — |  | <= 0.6 |  |",
  );
});

Deno.test("docTables refuses a run without the reference", () => {
  assert.throws(
    () => docTables({ servers: [server("us", [1, 1, 1])], comparison: null }),
    /no reference server/,
  );
});

import assert from "node:assert/strict";
import { docTables, type Results, type ServerRecord } from "./doc_tables.ts";

/** A server whose `spawn` p50 was `p50s` ms in its repetitions (the only measure given). */
function server(label: string, p50s: number[]): ServerRecord {
  const sorted = [...p50s].sort((a, b) => a - b);
  return {
    label,
    metrics: {
      spawn: {
        measures: {
          seqP50Ms: {
            unit: "ms",
            min: sorted[0]!,
            median: sorted[1]!,
            max: sorted[2]!,
          },
        },
        runs: p50s.map((seqP50Ms) => ({
          values: { seqP50Ms },
          host: { stealPct: 0, otherBusyPct: 2.5, loadAvg1Start: 1, loadAvg1End: 1.5 },
        })),
      },
    },
  };
}

function line(tables: string, start: string): string {
  return tables.split("\n").find((l) => l.startsWith(start)) ?? "";
}

Deno.test("docTables marks a target met only when every repetition meets it", () => {
  // Ratios per repetition 0.1, 0.1, 0.7: the median ratio meets <= 0.6, the worst does not.
  const results: Results = {
    servers: [server("us", [6, 6.4, 42]), server("reference", [60, 64, 60])],
  };
  const tables = docTables(results);
  assert.match(tables, /^0 of the 1 targets met/);
  assert.equal(
    line(tables, "| spawn | sequential p50"),
    "| spawn | sequential p50 | ms | 6.40 (6.00–42.0) | 60.0 (60.0–64.0) | 0.11 | 0.70 | <= 0.6 | **no** |",
  );
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
  };
  const tables = docTables(results);
  assert.match(tables, /^1 of the 1 targets met/);
  assert.equal(
    line(tables, "| spawn | sequential p50 | ms | 6.00 (6.00–6.00) | 3.00"),
    "| spawn | sequential p50 | ms | 6.00 (6.00–6.00) | 3.00 (3.00–3.00) | 60.0 (60.0–60.0) | 2.00 |  |  |  |",
  );
});

Deno.test("docTables shows a value the results file holds as null as missing, never as zero", () => {
  const us = server("us", [6, 6, 6]);
  us.metrics.spawn!.runs[1]!.values.seqP50Ms = null; // a repetition whose value was NaN
  us.metrics.spawn!.measures.seqP50Ms!.median = null;
  const tables = docTables({ servers: [us, server("reference", [60, 60, 60])] });
  // No worst repetition can be judged, so the target is left out rather than met.
  assert.match(tables, /^0 of the 0 targets met/);
  assert.equal(
    line(tables, "| spawn | sequential p50"),
    "| spawn | sequential p50 | ms | — (6.00–6.00) | 60.0 (60.0–60.0) | — |  | <= 0.6 |  |",
  );
});

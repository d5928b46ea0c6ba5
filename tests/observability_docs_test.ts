/**
 * docs/guide/observability.md's tables are the code's: the audit events with
 * their levels are `AUDIT_LEVELS`, the metrics with their types are what
 * `GET /metrics` declares (`# TYPE` lines of `metricsText`).
 *
 * @module
 */

import assert from "node:assert/strict";
import { AUDIT_LEVELS } from "../lib/server/observe/audit.ts";
import { metricsText } from "../lib/server/observe/server_metrics.ts";

const GUIDE = await Deno.readTextFile(new URL("../docs/guide/observability.md", import.meta.url));

/** The first two cells of the rows of the table under `heading`, code spans unwrapped. */
function tableCells(heading: string): [string, string][] {
  const section = GUIDE.split(`\n## ${heading}\n`)[1]?.split("\n## ")[0] ?? "";
  return section.split("\n").filter((line) => line.startsWith("| `")).map((line) => {
    const cells = line.split("|").map((cell) => cell.trim().replaceAll("`", ""));
    return [cells[1]!, cells[2]!];
  });
}

Deno.test("observability guide: the audit event table is AUDIT_LEVELS", () => {
  const documented = Object.fromEntries(tableCells("Audit log"));
  assert.deepEqual(documented, { ...AUDIT_LEVELS });
});

Deno.test("observability guide: the metrics table is what /metrics declares", () => {
  const text = metricsText({ processesRunning: () => 0, connections: () => 0, sessions: () => 0 });
  const declared = Object.fromEntries(
    [...text.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map((m) => [m[1]!, m[2]!]),
  );
  const documented = Object.fromEntries(
    tableCells("Metrics").map(([name, type]) => [name.replace(/\{.*\}$/, ""), type]),
  );
  assert.deepEqual(documented, declared);
});

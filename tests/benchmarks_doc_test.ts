/**
 * docs/benchmarks.md is a results document: its counts agree with its table,
 * every metric of the bench is described, every target the table marks unmet
 * has its paragraph, and no lab-log wording (times of day, passes, attempts)
 * is left. Whoever puts a new run's table in is held to the same.
 *
 * @module
 */

import assert from "node:assert/strict";
import { LOAD_METRICS } from "../bench/load.ts";
import { METRICS } from "../bench/metrics.ts";
import { docBlock } from "./helpers/doc_blocks.ts";

const DOC = await Deno.readTextFile(new URL("../docs/benchmarks.md", import.meta.url));

/** The results table's rows: metric, measure, ratio, met. */
function rows(): { metric: string; measure: string; ratio: string; met: string }[] {
  return DOC.split("\n").filter((line) => /^\| \w+ +\| .+\| (yes|\*\*no\*\*|) +\|$/.test(line))
    .map((line) => line.split("|").map((cell) => cell.trim()))
    .filter((cells) => cells.length === 11)
    .map((cells) => ({ metric: cells[1]!, measure: cells[2]!, ratio: cells[6]!, met: cells[9]! }));
}

/** The text of the section under `heading`. */
function section(heading: string): string {
  return DOC.split(`\n## ${heading}\n`)[1]?.split("\n## ")[0] ?? "";
}

Deno.test("docs/benchmarks.md's count of met targets is its table's", () => {
  const all = rows();
  assert.ok(all.length > 30, `found ${all.length} rows`);
  const targets = all.filter((row) => row.met !== "");
  const met = targets.filter((row) => row.met === "yes");
  assert.match(DOC, new RegExp(`${met.length} of the ${targets.length} targets`));
});

Deno.test("docs/benchmarks.md says what bounds every target its table marks unmet", () => {
  const bounds = section("What bounds the targets not met");
  const unmet = rows().filter((row) => row.met === "**no**");
  assert.ok(unmet.length > 0);
  for (const row of unmet) {
    assert.ok(
      bounds.includes(`${row.ratio}×`),
      `no paragraph gives ${row.metric} / ${row.measure}'s ratio ${row.ratio}×`,
    );
  }
});

Deno.test("docs/benchmarks.md describes every metric of deno task bench", () => {
  const described = section("What each metric measures");
  for (const metric of [...METRICS, ...LOAD_METRICS]) {
    assert.ok(described.includes(`- **${metric.name}**:`), `${metric.name} is not described`);
  }
});

Deno.test("docs/benchmarks.md has no lab-log wording", () => {
  const prose = DOC.split("\n").filter((line) => !line.startsWith("|")).join("\n");
  for (
    const pattern of [
      /\b\d{1,2}:\d{2}\b/, // a time of day
      /\bthis pass\b|\bpass\)|\bsecond pass\b/i,
      /\btried\b|\bnot kept\b|\babandoned\b/i,
      /\bsession of work\b|\btoday\b|\byesterday\b/i,
    ]
  ) {
    assert.doesNotMatch(prose, pattern);
  }
});

Deno.test("the benchmarking guide's command renders a results file into the document's tables", async () => {
  const dir = await Deno.makeTempDir();
  try {
    // Three repetitions of rpc's 64-in-flight rate: ours 2.9x-3.1x the reference's.
    const run = (rates: number[]) => ({
      measures: {
        pipelinedCallsPerS: { unit: "calls/s", min: rates[0], median: rates[1], max: rates[2] },
      },
      runs: rates.map((pipelinedCallsPerS) => ({
        values: { pipelinedCallsPerS },
        host: { stealPct: 0 },
      })),
    });
    const results = {
      servers: [
        { label: "us", metrics: { rpc: run([2900, 3000, 3100]) } },
        { label: "reference", metrics: { rpc: run([1000, 1000, 1000]) } },
      ],
      // The bench's own judgement, as `deno task bench` writes it.
      comparison: [{
        metric: "rpc",
        measure: "pipelinedCallsPerS",
        ratio: 3,
        worstRepetitionRatio: 2.9,
        target: { op: ">=", ratio: 1.5 },
        met: true,
      }],
    };
    const file = `${dir}/latest.json`;
    await Deno.writeTextFile(file, JSON.stringify(results));
    const command = docBlock("bench-doc-tables").trim();
    assert.ok(command.endsWith(" bench/results/latest.json"), command);
    const out = await new Deno.Command("sh", {
      args: ["-c", command.replace(/bench\/results\/latest\.json$/, file)],
      cwd: new URL("..", import.meta.url),
      stdout: "piped",
      stderr: "piped",
    }).output();
    const text = new TextDecoder().decode(out.stdout);
    assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
    assert.match(text, /^1 of the 1 targets met in every repetition\./);
    assert.ok(
      text.includes(
        "| rpc | 64 in flight | calls/s | 3000 (2900–3100) | 1000 (1000–1000) | 3.00 | 2.90 | >= 1.5 | yes |",
      ),
      text,
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

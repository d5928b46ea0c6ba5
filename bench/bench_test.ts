import assert from "node:assert/strict";
import { meets, worstRepetitionRatio } from "./bench.ts";

const runs = (values: number[]) => values.map((p50) => ({ values: { p50 } }));

Deno.test("a target is judged by the worst repetition, not the medians' ratio", () => {
  // Ratios 0.1, 0.1 and 0.7: the median ratio meets <= 0.6, the third repetition does not.
  const target = { op: "<=", ratio: 0.6 } as const;
  const worst = worstRepetitionRatio(runs([6, 6.4, 42]), runs([60, 64, 60]), "p50", target);
  assert.equal(worst, 0.7);
  assert.equal(meets(worst, target), false);
  // For a ">=" target the worst is the smallest ratio.
  const faster = { op: ">=", ratio: 2 } as const;
  assert.equal(worstRepetitionRatio(runs([300, 100]), runs([100, 100]), "p50", faster), 1);
});

Deno.test("a repetition without a value leaves the target unjudged", () => {
  const target = { op: "<=", ratio: 1 } as const;
  const ours: { values: Record<string, number> }[] = [{ values: { p50: 1 } }, { values: {} }];
  assert.ok(Number.isNaN(worstRepetitionRatio(ours, runs([2, 2]), "p50", target)));
});

import assert from "node:assert/strict";
import { meets, worstRepetitionRatio } from "./bench.ts";
import { METRICS } from "./metrics.ts";
import { existingServer } from "./server_process.ts";
import { connectWebSocket } from "./transport.ts";
import { sandboxAvailable } from "../lib/server/sandbox/availability.ts";

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

Deno.test({
  name: "the confinedSpawn metric spawns under --sandbox workspace-write in its writable root",
  // bubblewrap (or Landlock) confines the processes; without either the server refuses the flag.
  ignore: !sandboxAvailable().ok,
  async fn() {
    const confined = METRICS.find((metric) => metric.name === "confinedSpawn")!;
    const values = await confined.run({
      server: existingServer("ws://127.0.0.1:1"),
      command: `${Deno.execPath()} run --allow-all ${
        new URL("../main.ts", import.meta.url).pathname
      }`,
      quick: true,
      connect: (url) => connectWebSocket(url),
      deadline: Date.now() + 60_000,
      reference: false,
    });
    assert.ok(
      (values.seqP50Ms ?? 0) > 0 && (values.concurrentProcsPerS ?? 0) > 0,
      JSON.stringify(values),
    );
  },
});

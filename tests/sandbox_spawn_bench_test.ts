/**
 * docs/guide/sandbox.md's per-request cost commands (bench/sandbox_spawn.ts)
 * run as written, with 2 rounds instead of the guide's count (the numbers
 * are the guide's, measured once; a test asserts no timing), and print a
 * row per kind: on the host no sandbox, each layer that works and the
 * reference when the Codex CLI is installed; in the containers no sandbox,
 * `bubblewrap-no-proc` and `landlock`.
 *
 * @module
 */

import assert from "node:assert/strict";
import { docBlock } from "./helpers/doc_blocks.ts";
import { TEST_LAYERS } from "./helpers/sandbox_layers.ts";
import { PODMAN_SKIP } from "./helpers/podman_scene.ts";
import { findCodexBin } from "./interop/harness.ts";

/** Runs a block of the guide with its round count replaced by 2; returns its table's first column. */
async function rows(block: string): Promise<string[]> {
  const words = block.trim().split(/\s+/);
  assert.equal(words[0], "deno");
  assert.match(words.at(-1)!, /^\d+$/, "the block ends with its round count");
  const output = await new Deno.Command(Deno.execPath(), {
    args: [...words.slice(1, -1), "2"],
    cwd: new URL("..", import.meta.url).pathname,
    stdin: "null",
  }).output();
  assert.equal(output.code, 0, new TextDecoder().decode(output.stderr));
  return new TextDecoder().decode(output.stdout).split("\n")
    .filter((line) => /^\| [a-z]/.test(line)).map((line) => line.split("|")[1]!.trim());
}

Deno.test("docs/guide/sandbox.md: its per-request cost command prints a row for no sandbox, each layer that works here and the reference", async () => {
  assert.deepEqual(await rows(docBlock("sandbox-request-cost")), [
    "kind",
    "none (no sandbox)",
    ...TEST_LAYERS.filter((t) => t.availability.ok).map((t) => t.layer),
    ...(findCodexBin() === undefined ? [] : ["reference (codex exec-server)"]),
  ]);
});

Deno.test({
  name:
    `docs/guide/sandbox.md: its per-request cost command in podman containers prints a row for no sandbox, bubblewrap-no-proc and landlock${PODMAN_SKIP}`,
  ignore: PODMAN_SKIP !== "",
  async fn() {
    assert.deepEqual(await rows(docBlock("sandbox-request-cost-container")), [
      "kind",
      "none (no sandbox)",
      "bubblewrap-no-proc",
      "landlock (user namespaces denied)",
    ]);
  },
});

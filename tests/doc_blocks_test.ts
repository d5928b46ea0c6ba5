import assert from "node:assert/strict";
import { fencedBlocks } from "./helpers/doc_blocks.ts";

Deno.test("fencedBlocks() reads marked, not-run and unmarked blocks with their languages", () => {
  const doc = [
    "<!-- doc-test: first-one -->",
    "```sh",
    "echo one",
    "```",
    "",
    "<!-- doc-test: not run — needs a cluster -->",
    "```bash",
    "kubectl apply -f x.yaml",
    "```",
    "```toml",
    "a = 1",
    "```",
    "- item",
    "  ```console",
    "  $ ls",
    "  ```",
  ].join("\n");
  const blocks = fencedBlocks("d.md", doc);
  assert.deepStrictEqual(blocks.map((b) => [b.language, b.text, b.marker, b.line]), [
    ["sh", "echo one\n", { id: "first-one" }, 2],
    ["bash", "kubectl apply -f x.yaml\n", { notRun: "needs a cluster" }, 7],
    ["toml", "a = 1\n", undefined, 10],
    ["console", "$ ls\n", undefined, 14],
  ]);
});

Deno.test("fencedBlocks() takes the marker across the blank line deno fmt puts before a fence", () => {
  const doc = "<!-- doc-test: spaced -->\n\n```sh\necho spaced\n```\n\ntext\n\n```sh\nls\n```\n";
  assert.deepStrictEqual(fencedBlocks("d.md", doc).map((b) => b.marker), [
    { id: "spaced" },
    undefined,
  ]);
});

Deno.test("fencedBlocks() refuses a malformed marker instead of ignoring it", () => {
  assert.throws(() => fencedBlocks("d.md", "<!-- doc-test: Not An Id -->\n```sh\nx\n```\n"));
});

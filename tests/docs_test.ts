/**
 * The documents cannot rot: every shell block of README.md and docs/ is run by
 * a test or says why not, every block ID is unique and some test fetches it,
 * every relative link and anchor resolves, and the tables that restate the
 * command line are the command line's.
 *
 * @module
 */

import assert from "node:assert/strict";
import { SERVER_FLAGS } from "../lib/cli/server_flags.ts";
import { RUN_HELP } from "../lib/cli/run_command.ts";
import { allDocumentBlocks, type FencedBlock, SHELL_LANGUAGES } from "./helpers/doc_blocks.ts";
import { brokenLinks } from "../tools/check_links.ts";
import {
  CONFIGURATION_DOC,
  flagTable,
  normaliseTable,
  serverFlagTable,
  withFlagTable,
} from "../tools/flag_table.ts";

const ROOT = new URL("../", import.meta.url);

/** Where a block stands, for messages. */
const at = (block: FencedBlock) => `${block.file}:${block.line}`;

/** Shell blocks without a doc-test marker. */
export function unmarkedShellBlocks(blocks: readonly FencedBlock[]): string[] {
  return blocks.filter((b) => SHELL_LANGUAGES.has(b.language) && b.marker === undefined).map(at);
}

/** IDs carried by more than one block, with where. */
export function repeatedIds(blocks: readonly FencedBlock[]): string[] {
  const where = new Map<string, string[]>();
  for (const block of blocks) {
    if (block.marker && "id" in block.marker) {
      where.set(block.marker.id, [...(where.get(block.marker.id) ?? []), at(block)]);
    }
  }
  return [...where].filter(([, places]) => places.length > 1).map(([id, places]) =>
    `${id}: ${places.join(", ")}`
  );
}

/** The text of every TypeScript file under tests/ (where `docBlock("ID")` calls stand). */
function testSources(): string {
  const texts: string[] = [];
  const walk = (dir: URL) => {
    for (const entry of Deno.readDirSync(dir)) {
      const url = new URL(entry.name + (entry.isDirectory ? "/" : ""), dir);
      if (entry.isDirectory) walk(url);
      else if (entry.name.endsWith(".ts")) texts.push(Deno.readTextFileSync(url));
    }
  };
  walk(new URL("tests/", ROOT));
  return texts.join("\n");
}

/** IDs no test fetches with `docBlock("ID")`. */
export function unreferencedIds(blocks: readonly FencedBlock[], sources: string): string[] {
  return blocks.flatMap((block) =>
    block.marker && "id" in block.marker &&
      !sources.includes(`docBlock("${block.marker.id}")`)
      ? [`${block.marker.id} (${at(block)})`]
      : []
  );
}

const fence = "`".repeat(3);

Deno.test("every shell block of README.md and docs/ carries a doc-test marker", () => {
  assert.deepEqual(unmarkedShellBlocks(allDocumentBlocks()), []);
});

Deno.test("an unmarked shell block is found", () => {
  const planted = [
    { file: "x.md", line: 3, language: "bash", text: "ls\n", marker: undefined },
    { file: "x.md", line: 9, language: "toml", text: "a = 1\n", marker: undefined },
  ];
  assert.deepEqual(unmarkedShellBlocks(planted), ["x.md:3"]);
});

Deno.test("doc-test IDs are unique across README.md and docs/", () => {
  assert.deepEqual(repeatedIds(allDocumentBlocks()), []);
  const twice = { language: "sh", text: "", marker: { id: "same" } };
  assert.deepEqual(
    repeatedIds([{ ...twice, file: "a.md", line: 1 }, { ...twice, file: "b.md", line: 2 }]),
    [
      "same: a.md:1, b.md:2",
    ],
  );
});

Deno.test("every doc-test ID is fetched by some test with docBlock()", () => {
  assert.deepEqual(unreferencedIds(allDocumentBlocks(), testSources()), []);
  const orphan = { file: "a.md", line: 1, language: "sh", text: "", marker: { id: "orphan" } };
  assert.deepEqual(unreferencedIds([orphan], 'docBlock("other")'), ["orphan (a.md:1)"]);
});

Deno.test("every relative link and #anchor of README.md and docs/ resolves", () => {
  const broken = brokenLinks().map((l) => `${l.file}:${l.line}: ${l.target}: ${l.reason}`);
  assert.deepEqual(broken, []);
});

Deno.test("the link check finds a missing file, a missing anchor and a repeated heading's anchor", () => {
  const docs = new Map([
    ["README.md", "# Top\n## Notes\n## Notes\n"],
    [
      "docs/x.md",
      "[a](../README.md#notes-1) [b](../README.md#notes-2) [c](missing.md) [d](#here)\n" +
      "`[e](ignored.md)`\n" + `${fence}md\n[f](ignored.md)\n${fence}\n` + "## Here\n",
    ],
  ]);
  assert.deepEqual(brokenLinks(docs).map((l) => `${l.file}:${l.line}: ${l.target}`), [
    "docs/x.md:1: ../README.md#notes-2",
    "docs/x.md:1: missing.md",
  ]);
});

Deno.test(`${CONFIGURATION_DOC}'s flag table is SERVER_FLAGS (deno task docs:flags)`, async () => {
  const doc = await Deno.readTextFile(new URL(CONFIGURATION_DOC, ROOT));
  assert.equal(normaliseTable(doc), normaliseTable(withFlagTable(doc, serverFlagTable())));
  const stale = withFlagTable(doc, flagTable({ listen: SERVER_FLAGS.listen }));
  assert.notEqual(normaliseTable(stale), normaliseTable(withFlagTable(doc, serverFlagTable())));
});

/** The `--flag` names in the first column of a Markdown table that follows `heading`. */
function tableFlags(markdown: string, heading: string): string[] {
  const section = markdown.split(heading)[1]?.split("\n## ")[0] ?? "";
  return section.split("\n").filter((line) => line.startsWith("| `")).flatMap((line) =>
    [...line.split("|")[1]!.matchAll(/--([a-z][a-z0-9-]*)/g)].map((m) => m[1]!)
  );
}

Deno.test("the README's flags are server flags", async () => {
  const readme = await Deno.readTextFile(new URL("README.md", ROOT));
  const flags = tableFlags(readme, "## The flags everyone needs");
  assert.ok(flags.length >= 5, `found ${flags}`);
  assert.deepEqual(flags.filter((flag) => !(flag in SERVER_FLAGS)), []);
});

Deno.test("docs/client.md's exec-server run flags are the ones exec-server run --help lists", async () => {
  const doc = await Deno.readTextFile(new URL("docs/client.md", ROOT));
  const documented = new Set(tableFlags(doc, "## `exec-server run`"));
  const helped = new Set(
    [...RUN_HELP.matchAll(/^\s+(?:-\w, )?--([a-z][a-z0-9-]*)/gm)].map((m) => m[1]!),
  );
  helped.delete("help");
  assert.deepEqual([...documented].sort(), [...helped].sort());
});

import assert from "node:assert/strict";
import { mainGraph } from "./helpers/startup_graph.ts";

/** The local files of `main.ts`'s static import graph: what every server start loads. */
async function startupFiles(): Promise<string[]> {
  return (await mainGraph({ dynamic: false })).filter((specifier) => specifier.startsWith("file:"));
}

Deno.test("every module main.ts loads at start-up is ASCII, so V8 gets its transpiled source (and the inline source map) as a one-byte string", async () => {
  const files = await startupFiles();
  assert.ok(files.length > 10, `only ${files.length} modules found`);
  const offenders: string[] = [];
  for (const file of files) {
    const lines = (await Deno.readTextFile(new URL(file))).split("\n");
    const line = lines.findIndex((text) => [...text].some((c) => c.charCodeAt(0) > 0x7f));
    if (line >= 0) offenders.push(`${new URL(file).pathname}:${line + 1}`);
  }
  assert.deepEqual(offenders, []);
});

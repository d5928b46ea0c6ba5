/**
 * What `deno run main.ts` loads before its first line runs: every module reachable through
 * static imports and `import()` calls with a literal specifier (Deno fetches and resolves those
 * too, though it runs them only when called).
 *
 * @module
 */

import assert from "node:assert/strict";
import { mainGraph } from "./helpers/startup_graph.ts";

Deno.test("deno run main.ts resolves no npm package at start (the MCP SDK's graph cost every start about 15 ms)", async () => {
  const specifiers = await mainGraph({ dynamic: true });
  assert.ok(specifiers.length > 10, `only ${specifiers.length} modules found`);
  assert.deepEqual(specifiers.filter((specifier) => specifier.startsWith("npm:")), []);
});

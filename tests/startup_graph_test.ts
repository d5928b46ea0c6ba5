/**
 * What `deno run main.ts` loads before its first line runs: every module reachable through
 * static imports and `import()` calls with a literal specifier (Deno fetches and resolves those
 * too, though it runs them only when called).
 *
 * @module
 */

import assert from "node:assert/strict";

const MAIN = new URL("../main.ts", import.meta.url);

interface InfoModule {
  specifier: string;
  dependencies?: { code?: { specifier?: string } }[];
}

/** Every specifier `deno run main.ts` prepares at start: code imports, static and literal dynamic. */
async function preparedSpecifiers(): Promise<string[]> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["info", "--json", MAIN.pathname],
    stdin: "null",
    stderr: "inherit",
  }).output();
  assert.equal(out.code, 0);
  const info = JSON.parse(new TextDecoder().decode(out.stdout)) as {
    roots: string[];
    modules: InfoModule[];
  };
  const bySpecifier = new Map(info.modules.map((module) => [module.specifier, module]));
  const seen = new Set<string>();
  const pending = [...info.roots];
  while (pending.length > 0) {
    const specifier = pending.pop()!;
    if (seen.has(specifier)) continue;
    seen.add(specifier);
    for (const dependency of bySpecifier.get(specifier)?.dependencies ?? []) {
      if (dependency.code?.specifier !== undefined) pending.push(dependency.code.specifier);
    }
  }
  return [...seen];
}

Deno.test("deno run main.ts resolves no npm package at start (the MCP SDK's graph cost every start about 15 ms)", async () => {
  const specifiers = await preparedSpecifiers();
  assert.ok(specifiers.length > 10, `only ${specifiers.length} modules found`);
  assert.deepEqual(specifiers.filter((specifier) => specifier.startsWith("npm:")), []);
});

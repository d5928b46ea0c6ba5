/**
 * `main.ts`'s module graph as `deno info --json` gives it, walked from the root.
 *
 * @module
 */

import assert from "node:assert/strict";

const MAIN = new URL("../../main.ts", import.meta.url);

interface InfoModule {
  specifier: string;
  dependencies?: { isDynamic?: boolean; code?: { specifier?: string } }[];
}

/**
 * The specifiers reachable from `main.ts` through code imports: static ones only, or with
 * `dynamic` also the `import()` calls with a literal specifier (which `deno run` prepares too).
 *
 * @param options Whether dynamic imports are followed.
 * @returns The specifiers, the root included.
 */
export async function mainGraph(options: { dynamic: boolean }): Promise<string[]> {
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
      const next = dependency.code?.specifier;
      if ((options.dynamic || !dependency.isDynamic) && next !== undefined) pending.push(next);
    }
  }
  return [...seen];
}

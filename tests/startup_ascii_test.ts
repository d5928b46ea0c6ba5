import assert from "node:assert/strict";

const MAIN = new URL("../main.ts", import.meta.url);

interface InfoModule {
  specifier: string;
  dependencies?: { isDynamic?: boolean; code?: { specifier?: string } }[];
}

/** The local files of `main.ts`'s static import graph: what every server start loads. */
async function startupFiles(): Promise<string[]> {
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
      if (!dependency.isDynamic && next !== undefined) pending.push(next);
    }
  }
  return [...seen].filter((specifier) => specifier.startsWith("file:"));
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

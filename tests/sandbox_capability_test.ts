import assert from "node:assert/strict";
import { probeSandbox } from "../lib/server/sandbox/availability.ts";

const availability = probeSandbox({ layer: "bubblewrap" });
const AVAILABILITY = new URL("../lib/server/sandbox/availability.ts", import.meta.url).href;

/**
 * `processSandbox` (the cheap checks, before any probe) in a fresh `deno run`
 * of `script` with `permissions` and `PATH`.
 */
async function capabilityIn(script: string, permissions: string[], path: string): Promise<boolean> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", ...permissions, script],
    env: { PATH: path },
    stdin: "null",
    stderr: "inherit",
  }).output();
  assert.equal(out.code, 0);
  return JSON.parse(new TextDecoder().decode(out.stdout));
}

Deno.test({
  name:
    "processSandbox is judged on the first bwrap on PATH when --allow-run is scoped, on any bwrap when it is not" +
    (availability.ok ? "" : ` (ignored: ${availability.reason})`),
  ignore: !availability.ok,
  fn: async () => {
    const bwrap = availability.ok && availability.layer !== "landlock" ? availability.bwrap : "";
    const dir = await Deno.makeTempDir({ prefix: "capability-" });
    try {
      // A `bwrap` file ahead of the real one, which a scoped --allow-run does not cover.
      await Deno.writeTextFile(`${dir}/bwrap`, "#!/bin/sh\nexit 1\n", { mode: 0o755 });
      const script = `${dir}/capability.ts`;
      await Deno.writeTextFile(
        script,
        `import { sandboxCapability } from ${JSON.stringify(AVAILABILITY)};\n` +
          "console.log(JSON.stringify(sandboxCapability()));\n",
      );
      const bwrapDir = bwrap.slice(0, bwrap.lastIndexOf("/"));
      const scoped = [
        "--allow-read",
        "--allow-env",
        "--allow-write",
        "--allow-ffi",
        `--allow-run=${bwrap},/bin/sh`,
      ];
      const path = `/nonexistent:${dir}:${bwrapDir}:/bin`;
      assert.equal(await capabilityIn(script, scoped, path), false);
      assert.equal(await capabilityIn(script, ["--allow-all"], path), true);
      // Without the decoy, the scoped grant covers the first bwrap on PATH.
      assert.equal(await capabilityIn(script, scoped, `/nonexistent:${bwrapDir}:/bin`), true);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

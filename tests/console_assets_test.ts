/**
 * The web console's embedded terminal emulator is exactly the pinned
 * `@xterm/xterm` package: the committed module is what
 * `deno task console:assets` generates from it.
 *
 * @module
 */

import assert from "node:assert/strict";
import { ASSETS_MODULE, assetsModule, packageFiles } from "../tools/xterm_assets.ts";

Deno.test("console assets: lib/server/observe/xterm_assets.ts is regenerated from @xterm/xterm (deno task console:assets)", async () => {
  const committed = await Deno.readTextFile(ASSETS_MODULE);
  assert.ok(
    committed === assetsModule(await packageFiles()),
    "stale: run deno task console:assets",
  );
});

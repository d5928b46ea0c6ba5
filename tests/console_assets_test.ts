/**
 * The web console's embedded terminal emulator is exactly the pinned
 * `@xterm/xterm` package: the committed files are what
 * `deno task console:assets` copies from it.
 *
 * @module
 */

import assert from "node:assert/strict";
import { ASSETS_DIR, packageFiles } from "../tools/xterm_assets.ts";
import { defaultServerEnv, ServerProcess } from "./helpers/server_harness.ts";

Deno.test("console assets: lib/server/observe/xterm/ holds @xterm/xterm's files unchanged (deno task console:assets)", async () => {
  for (const [name, text] of Object.entries(await packageFiles())) {
    const committed = await Deno.readTextFile(new URL(name, ASSETS_DIR));
    assert.ok(committed === text, `${name} is stale: run deno task console:assets`);
  }
});

/** Media types the test's file server sends, by extension (Deno reads a remote module's type from it). */
const MEDIA_TYPES: Record<string, string> = {
  ts: "application/typescript",
  js: "text/plain; charset=utf-8",
  css: "text/plain; charset=utf-8",
};

Deno.test("console assets: a server run by http URL, reading only its workspace, serves the vendored emulator", async () => {
  const root = new URL("../", import.meta.url);
  const files = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, async (request) => {
    const path = new URL(request.url).pathname;
    try {
      const body = await Deno.readFile(new URL(`.${path}`, root));
      const type = MEDIA_TYPES[path.slice(path.lastIndexOf(".") + 1)] ?? "text/plain";
      return new Response(body, { headers: { "content-type": type } });
    } catch {
      return new Response(null, { status: 404 });
    }
  });
  const workspace = await Deno.makeTempDir();
  // Its own module cache, so nothing of the served copy stays in the user's.
  const denoDir = await Deno.makeTempDir();
  try {
    await using server = await ServerProcess.start({
      listen: "ws",
      command: [
        Deno.execPath(),
        "run",
        "--no-config",
        "--no-prompt",
        "--allow-net=127.0.0.1",
        `--allow-read=${workspace}`,
        `--allow-write=${workspace}`,
        "--allow-env",
        "--allow-sys",
        "--allow-run",
        `http://127.0.0.1:${files.addr.port}/main.ts`,
      ],
      env: { ...defaultServerEnv(), DENO_DIR: denoDir },
      cwd: workspace,
    });
    const http = server.url.replace(/^ws/, "http");
    for (const name of ["xterm.js", "xterm.css"]) {
      const served = await (await fetch(`${http}/console/${name}`)).text();
      assert.ok(served === await Deno.readTextFile(new URL(name, ASSETS_DIR)), `${name} differs`);
    }
  } finally {
    await files.shutdown();
    await Deno.remove(workspace, { recursive: true });
    await Deno.remove(denoDir, { recursive: true });
  }
});

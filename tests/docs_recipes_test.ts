/**
 * The recipes of docs/guide/, run as shown. A server's port 8765 becomes one
 * the test picked free; `exec-server` on `PATH` is this checkout's main.ts; a
 * release URL becomes this tree served on 127.0.0.1 (with the
 * `--allow-import` that host needs).
 *
 * @module
 */

import assert from "node:assert/strict";
import { docBlock } from "./helpers/doc_blocks.ts";
import {
  execServerOnPath,
  freePort,
  fromServedTree,
  serveTree,
  startRecipeServer,
} from "./helpers/doc_recipes.ts";

const decode = (bytes: Uint8Array) => new TextDecoder().decode(bytes);

Deno.test("configuration guide: a signed-bearer-token server runs a command for a token minted with jose and one minted with openssl", async () => {
  const dir = await Deno.makeTempDir({ prefix: "docs-jwt-" });
  try {
    const port = freePort();
    const env = { PATH: `${await execServerOnPath(dir)}:${Deno.env.get("PATH")}` };
    await using server = await startRecipeServer(docBlock("jwt-server"), port, { cwd: dir, env });
    assert.equal(server.url, `ws://127.0.0.1:${port}`);
    for (
      const [id, block] of [["jose", docBlock("jwt-mint-jose")], [
        "openssl",
        docBlock("jwt-mint-openssl"),
      ]]
    ) {
      const run = await new Deno.Command("/bin/sh", {
        args: ["-e", "-c", block!.replaceAll("8765", String(port))],
        cwd: dir,
        env: { ...env, DENO_NO_UPDATE_CHECK: "1" },
        stdin: "null",
      }).output();
      assert.equal(run.code, 0, `${id}: ${decode(run.stderr)}`);
      assert.equal(decode(run.stdout), "ok\n", id);
    }
    // The same command with a token signed under another secret is refused.
    await Deno.writeTextFile(`${dir}/jwt-secret`, "0".repeat(64));
    const refused = await new Deno.Command("/bin/sh", {
      args: ["-c", docBlock("jwt-mint-openssl").replaceAll("8765", String(port))],
      cwd: dir,
      env,
      stdin: "null",
    }).output();
    assert.equal(refused.code, 255, decode(refused.stderr));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

let bwrap = false;
try {
  bwrap = Deno.statSync("/usr/bin/bwrap").isFile;
} catch { /* not installed */ }

Deno.test({
  name: bwrap
    ? "install guide: deno run by URL with one project's permissions and sandbox serves over stdio"
    : "install guide: deno run by URL with one project's permissions and sandbox serves over stdio (ignored: no /usr/bin/bwrap)",
  ignore: !bwrap,
  async fn() {
    const home = Deno.env.get("HOME") ?? "/root";
    await Deno.mkdir(`${home}/.cache`, { recursive: true });
    // Not under /tmp: a sandboxed process gets a private /tmp.
    const project = await Deno.makeTempDir({ dir: `${home}/.cache`, prefix: "docs-project-" });
    try {
      await using tree = serveTree();
      const block = fromServedTree(docBlock("deno-run-by-url"), tree).replaceAll(
        "/srv/project",
        project,
      );
      const child = new Deno.Command("/bin/sh", {
        args: ["-c", block],
        env: { DENO_NO_UPDATE_CHECK: "1" },
        stdin: "piped",
        stdout: "piped",
        stderr: "piped",
      }).spawn();
      const stderr = new Response(child.stderr).text();
      const conversation = [
        { id: 1, method: "initialize", params: { clientName: "docs" } },
        { method: "initialized" },
        {
          id: 2,
          method: "process/start",
          params: {
            processId: "p",
            argv: ["/bin/sh", "-c", "echo written > made-here"],
            cwd: `file://${project}`,
            env: {},
            tty: false,
          },
        },
      ];
      const writer = child.stdin.getWriter();
      await writer.write(
        new TextEncoder().encode(conversation.map((m) => JSON.stringify(m)).join("\n") + "\n"),
      );
      const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
      let text = "";
      while (!text.includes('"method":"process/closed"')) {
        const { value, done } = await reader.read();
        if (done) break;
        text += value;
      }
      await writer.close();
      reader.releaseLock();
      await child.stdout.cancel().catch(() => {});
      await child.status;
      assert.match(text, /"id":1,"result":/, `answers initialize: ${text} ${await stderr}`);
      assert.match(text, /"sandboxType":"linuxSeccomp"/, text);
      assert.equal(await Deno.readTextFile(`${project}/made-here`), "written\n");
    } finally {
      await Deno.remove(project, { recursive: true });
    }
  },
});

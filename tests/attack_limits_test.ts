/**
 * Attack: one request kills the server. `fs/readFile` of a 200 MiB file used
 * to end the process ("Fatal process out of memory"; 64 MiB already needed
 * 564 MiB of RSS), leaving the session's processes running as orphans. Large
 * replies are now streamed (tests/streamed_reply_test.ts reads 400 MiB with
 * the server's peak bounded); here: `fs/walk`'s reply bound, at the bound.
 *
 * @module
 */

import assert from "node:assert/strict";
import { walk, WALK_REPLY_CHARS } from "../lib/server/fs/walk.ts";
import { uriFromPath } from "../lib/server/host/path_uri.ts";
import { handshake, ServerProcess } from "./helpers/server_harness.ts";

/** Creates empty files of these names in `dir` (one `touch` run: thousands of long paths are slow one by one). */
async function touchAll(dir: string, names: string[]): Promise<void> {
  const touch = new Deno.Command("xargs", { args: ["-0", "touch"], cwd: dir, stdin: "piped" })
    .spawn();
  const writer = touch.stdin.getWriter();
  await writer.write(new TextEncoder().encode(names.join("\0")));
  await writer.close();
  assert.equal((await touch.status).code, 0);
}

async function assertServes(server: ServerProcess): Promise<void> {
  await using other = await server.connect();
  await handshake(other);
  const status = await other.request(1, "environment/status");
  assert.deepEqual(status.result, { status: "ready" });
}

/**
 * A tree whose walk lists paths of exactly {@linkcode WALK_REPLY_CHARS} characters: a chain of
 * twelve 250-character directories and, in the deepest, files whose names (240 to 255
 * characters) make up the rest. Returns the deepest directory and its file names.
 */
async function treeOfExactlyWalkReplyChars(
  root: string,
): Promise<{ deep: string; names: string[] }> {
  let deep = root;
  let total = 0;
  for (let i = 0; i < 12; i++) {
    deep += `/${String(i).padStart(250, "d")}`;
    total += uriFromPath(deep).length;
  }
  await Deno.mkdir(deep, { recursive: true });
  const prefix = uriFromPath(deep).length + 1;
  const count = Math.floor((WALK_REPLY_CHARS - total) / (prefix + 240));
  let rest = WALK_REPLY_CHARS - total - count * (prefix + 240);
  const names: string[] = [];
  for (let i = 0; i < count; i++) {
    const extra = Math.min(15, rest);
    rest -= extra;
    names.push(String(i).padStart(240 + extra, "f"));
  }
  assert.equal(rest, 0, "the names cannot make up the rest");
  await touchAll(deep, names);
  return { deep, names };
}

const WALK_ALL = {
  maxDepth: 64,
  maxDirectories: 10_000,
  maxEntries: 50_000,
  followDirectorySymlinks: false,
};

Deno.test("fs/walk's reply holds paths of exactly 16 Mi characters; one character more leaves out the last entry and says truncated", async (t) => {
  const root = await Deno.makeTempDir({ prefix: "es-walk-exact-" });
  try {
    const { deep, names } = await treeOfExactlyWalkReplyChars(root);
    const charsOf = (entries: { path: string }[]) => entries.reduce((n, e) => n + e.path.length, 0);
    await t.step("paths of exactly 16 Mi characters are all listed, not truncated", async () => {
      const result = await walk(root, WALK_ALL);
      assert.equal(result.truncated, false);
      assert.equal(result.entries.length, 12 + names.length);
      assert.equal(charsOf(result.entries), WALK_REPLY_CHARS);
    });
    await t.step("16 Mi + 1 characters: the last entry is left out, truncated", async () => {
      const short = names.find((name) => name.length < 255)!;
      await Deno.rename(`${deep}/${short}`, `${deep}/${short}g`);
      const result = await walk(root, WALK_ALL);
      assert.equal(result.truncated, true);
      assert.equal(result.entries.length, 12 + names.length - 1);
      const listed = new Set(result.entries.map((e) => e.path));
      const left = [...names.filter((n) => n !== short), `${short}g`]
        .map((name) => uriFromPath(`${deep}/${name}`))
        .filter((uri) => !listed.has(uri));
      assert.equal(left.length, 1);
      assert.equal(charsOf(result.entries) + left[0]!.length, WALK_REPLY_CHARS + 1);
    });
    await t.step(
      "16 Mi + 1 characters through a server: the same truncated reply, and it keeps serving",
      async () => {
        await using server = await ServerProcess.start({ listen: "ws" });
        await using client = await server.connect();
        await handshake(client);
        const reply = await client.request(1, "fs/walk", {
          path: `file://${root}`,
          options: WALK_ALL,
        }, 60_000);
        const result = reply.result as { entries: { path: string }[]; truncated: boolean };
        assert.ok(result, JSON.stringify(reply).slice(0, 300));
        assert.equal(result.truncated, true);
        assert.equal(result.entries.length, 12 + names.length - 1);
        assert.deepEqual(result, await walk(root, WALK_ALL));
        await assertServes(server);
      },
    );
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

/**
 * Attack: 32 connections block everyone. `fs/copy` onto a FIFO opened it
 * blocking (waiting for a reader that never comes) and held one of Deno's
 * blocking-pool threads; once they were used up, `fs/readFile` from every
 * other connection hung. A FIFO destination is now detected before the open
 * and refused with ENXIO, as `fs/writeFile` and `fs/open` already did.
 *
 * @module
 */

import assert from "node:assert/strict";
import { handshake, type ProtocolClient, ServerProcess } from "./helpers/server_harness.ts";

async function mkfifo(path: string): Promise<void> {
  const { success } = await new Deno.Command("mkfifo", { args: [path] }).output();
  assert.ok(success, "mkfifo failed");
}

Deno.test("fs/copy onto a FIFO without a reader gets ENXIO from 40 connections, and other connections keep answering", async () => {
  const dir = await Deno.makeTempDir({ prefix: "es-fifo-" });
  const clients: ProtocolClient[] = [];
  try {
    await Deno.writeTextFile(`${dir}/source`, "data");
    await Deno.writeTextFile(`${dir}/other`, "other");
    await using server = await ServerProcess.start({ listen: "ws" });
    const replies = [];
    for (let i = 0; i < 40; i++) {
      await mkfifo(`${dir}/fifo-${i}`);
      const client = await server.connect();
      clients.push(client);
      await handshake(client);
      replies.push(client.request(1, "fs/copy", {
        sourcePath: `file://${dir}/source`,
        destinationPath: `file://${dir}/fifo-${i}`,
        recursive: false,
      }, 30_000));
    }
    for (const reply of await Promise.all(replies)) {
      const error = reply.error as { code: number; message: string };
      assert.deepEqual([error.code, error.message], [
        -32603,
        "No such device or address (os error 6)",
      ]);
    }
    await using other = await server.connect();
    await handshake(other);
    const read = await other.request(1, "fs/readFile", { path: `file://${dir}/other` }, 30_000);
    assert.deepEqual(read.result, { dataBase64: btoa("other") });
  } finally {
    for (const client of clients) await client.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("fs/readFile of a path swapped between a file and a FIFO never hangs: what is opened is checked", async () => {
  const dir = await Deno.makeTempDir({ prefix: "es-swap-" });
  await Deno.writeTextFile(`${dir}/file`, "x");
  await mkfifo(`${dir}/fifo`);
  // Swaps `p` between the file and the FIFO as fast as the shell can rename.
  const swapper = new Deno.Command("/bin/sh", {
    args: [
      "-c",
      `cd '${dir}' && while :; do ln -f file a && mv -f a p; ln -f fifo b && mv -f b p; done`,
    ],
    stdout: "null",
    stderr: "null",
  }).spawn();
  try {
    await using server = await ServerProcess.start({ listen: "ws" });
    await using client = await server.connect();
    await handshake(client);
    const seen = new Set<string>();
    for (let id = 1; id <= 300; id++) {
      const reply = await client.request(id, "fs/readFile", { path: `file://${dir}/p` }, 10_000);
      if (reply.result) {
        assert.deepEqual(reply.result, { dataBase64: btoa("x") });
        seen.add("file");
      } else {
        const error = reply.error as { code: number; message: string };
        assert.ok(
          error.message === `path \`${dir}/p\` is not a file` ||
            error.message === "No such file or directory (os error 2)",
          error.message,
        );
        seen.add(error.message.startsWith("path") ? "fifo" : "missing");
      }
    }
    console.log(`attack ${JSON.stringify({ seen: [...seen] })}`);
  } finally {
    swapper.kill("SIGKILL");
    await swapper.status;
    await Deno.remove(dir, { recursive: true });
  }
});

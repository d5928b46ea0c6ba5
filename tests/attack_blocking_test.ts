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

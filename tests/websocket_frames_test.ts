import assert from "node:assert/strict";
import { handshake, ServerProcess } from "./helpers/server_harness.ts";

// The server's text frames carry their JSON encoded straight into the frame for ASCII text, and
// encoded then framed otherwise; both, at each of the three frame-length forms (7-bit, 16-bit
// and 64-bit), must arrive as the same JSON the server meant.

Deno.test("WebSocket replies arrive whole for ASCII and non-ASCII text of every frame-length form", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await using server = await ServerProcess.start({ listen: "ws" });
    await using client = await server.connect();
    await handshake(client);
    let id = 10;
    for (const size of [10, 200, 70_000]) {
      const content = "a".repeat(size);
      const path = `${dir}/${size}.txt`;
      await Deno.writeTextFile(path, content);
      const reply = await client.request(++id, "fs/readFile", { path: `file://${path}` });
      const base64 = (reply.result as { dataBase64: string }).dataBase64;
      assert.equal(new TextDecoder().decode(Uint8Array.fromBase64(base64)), content);
    }
    // Non-ASCII reply text: directory entries named with accents, one short and many long.
    for (const count of [1, 400]) {
      const sub = `${dir}/d${count}`;
      await Deno.mkdir(sub);
      const names = Array.from(
        { length: count },
        (_, i) => `é✓${i}`.padEnd(count > 1 ? 60 : 3, "ü"),
      );
      for (const name of names) await Deno.writeTextFile(`${sub}/${name}`, "");
      const reply = await client.request(++id, "fs/readDirectory", { path: `file://${sub}` });
      const entries = (reply.result as { entries: { fileName: string }[] }).entries;
      assert.deepEqual(entries.map((entry) => entry.fileName).sort(), names.sort());
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

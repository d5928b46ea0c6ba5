/**
 * Large `fs/readFile` replies are streamed (docs/guide/limits.md): the reply's JSON is
 * made a chunk of the file at a time while it is written — a WebSocket message in
 * continuation frames, a stdio line in pieces — so the server's memory is bounded by a
 * chunk, not by the file. A 40 MiB file round-trips through `fs/writeFile` and
 * `fs/readFile` (which the reference allows and a 32 MiB cap refused); a 400 MiB file
 * comes back byte-identical over both transports with the server's peak RSS growth
 * printed and bounded. The test reads the reply as a stream too: it hashes the decoded
 * bytes as they come, never holding the reply.
 *
 * @module
 */

import assert from "node:assert/strict";
import { READ_FILE_LIMIT } from "../lib/server/fs/read_file.ts";
import { eventually, handshake, type Json, ServerProcess } from "./helpers/server_harness.ts";
import { RawWebSocket } from "./helpers/reliability_server.ts";
import {
  memoryKib,
  readOverStdio,
  readOverWebSocket,
  resetPeak,
  writeFileOf,
} from "./helpers/streamed_reply.ts";

/** Bound of the server's peak RSS growth while it serves the 400 MiB file. */
const PEAK_GROWTH_BOUND_KIB = 64 * 1024;
/** Bound of the server's peak RSS growth while it takes a 40 MiB `fs/writeFile` (a 53 MiB message). */
const WRITE_GROWTH_BOUND_KIB = 8 * 40 * 1024;

Deno.test("a 400 MiB file comes back through fs/readFile over WebSocket and stdio, byte-identical, with the server's peak RSS growing by under 64 MiB", async (t) => {
  const dir = await Deno.makeTempDir({ prefix: "es-stream-" });
  try {
    const mib = 400;
    const digest = await writeFileOf(`${dir}/big`, mib);
    for (
      const [transport, read] of [["websocket", readOverWebSocket], [
        "stdio",
        readOverStdio,
      ]] as const
    ) {
      await t.step(transport, async () => {
        const result = await read(`${dir}/big`);
        console.log(
          `streamed ${
            JSON.stringify({ transport, mib, growthKib: result.growthKib, seconds: result.seconds })
          }`,
        );
        assert.equal(result.bytes, mib << 20);
        assert.equal(result.digest, digest);
        assert.ok(
          result.growthKib < PEAK_GROWTH_BOUND_KIB,
          `peak RSS grew by ${result.growthKib} KiB`,
        );
      });
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("a 40 MiB file round-trips through fs/writeFile and fs/readFile over WebSocket and stdio", async () => {
  const dir = await Deno.makeTempDir({ prefix: "es-stream-" });
  try {
    const data = new Uint8Array(40 << 20).map((_, i) => (i * 131 + (i >> 12)) & 0xff);
    const dataBase64 = data.toBase64();
    for (const listen of ["ws", "stdio"] as const) {
      await using server = await ServerProcess.start({ listen });
      await using client = listen === "ws" ? await server.connect() : server.stdio!;
      await handshake(client);
      const path = `file://${dir}/${listen}`;
      const before = resetPeak(server.pid);
      const wrote = await client.request(2, "fs/writeFile", { path, dataBase64 }, 60_000);
      assert.deepEqual(wrote.result, {}, JSON.stringify(wrote).slice(0, 300));
      const growthKib = memoryKib(server.pid).hwm - before;
      console.log(`written ${JSON.stringify({ transport: listen, mib: 40, growthKib })}`);
      // The message, its decoded bytes and the write: a few times the file, never unbounded.
      assert.ok(growthKib < WRITE_GROWTH_BOUND_KIB, `peak RSS grew by ${growthKib} KiB`);
      const read = await client.request(3, "fs/readFile", { path }, 60_000);
      const back = (read.result as Json | undefined)?.dataBase64;
      assert.ok(typeof back === "string", JSON.stringify(read).slice(0, 300));
      assert.ok(back === dataBase64, `${listen}: the content read back differs`);
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("fs/readFile of a file over 512 MiB is refused before reading, with the reference's message", async () => {
  const dir = await Deno.makeTempDir({ prefix: "es-stream-" });
  try {
    // Sparse: the size is what is checked, no byte is read.
    using file = await Deno.open(`${dir}/huge`, { write: true, create: true });
    await file.truncate(READ_FILE_LIMIT + 1);
    await using server = await ServerProcess.start({ listen: "stdio" });
    await handshake(server.stdio!);
    const reply = await server.stdio!.request(2, "fs/readFile", { path: `file://${dir}/huge` });
    assert.deepEqual(reply.error, {
      code: -32600,
      message: "file is too large to read: limit is 536870912 bytes",
      data: { kind: "replyTooLarge" },
    });
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

/** Paths of the descriptors `pid` has open. */
function openPaths(pid: number): string[] {
  const paths: string[] = [];
  for (const entry of Deno.readDirSync(`/proc/${pid}/fd`)) {
    try {
      paths.push(Deno.readLinkSync(`/proc/${pid}/fd/${entry.name}`));
    } catch {
      // Closed meanwhile.
    }
  }
  return paths;
}

Deno.test("a client that goes away in the middle of a streamed reply leaves no open file behind, and the server serves on", async () => {
  const dir = await Deno.makeTempDir({ prefix: "es-stream-" });
  try {
    await writeFileOf(`${dir}/big`, 64);
    await using server = await ServerProcess.start({ listen: "ws" });
    const socket = await RawWebSocket.connect(server.port);
    await socket.sendText(
      JSON.stringify({ id: 1, method: "initialize", params: { clientName: "x" } }),
    );
    await socket.sendText(JSON.stringify({ method: "initialized", params: {} }));
    assert.match((await socket.readMessage())!, /"sessionId"/);
    await socket.sendText(
      JSON.stringify({ id: 2, method: "fs/readFile", params: { path: `file://${dir}/big` } }),
    );
    // The reply has begun (its first bytes are here) and the file is open; then the client is gone.
    assert.ok((await socket.conn.read(new Uint8Array(4096))) !== null);
    assert.ok(openPaths(server.pid).includes(`${dir}/big`), "the file is open while it streams");
    socket.close();
    assert.ok(
      await eventually(() => !openPaths(server.pid).includes(`${dir}/big`)),
      "the file is closed once the client is gone",
    );
    await using client = await server.connect();
    await handshake(client);
    const status = await client.request(2, "environment/status");
    assert.deepEqual(status.result, { status: "ready" });
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("a buffered http/request body of 100 MiB (beyond the old 32 MiB bound) comes back over stdio, byte-identical, its base64 streamed", async () => {
  const dir = await Deno.makeTempDir({ prefix: "es-stream-" });
  try {
    const mib = 100;
    const digest = await writeFileOf(`${dir}/body`, mib);
    await using http = Deno.serve(
      { hostname: "127.0.0.1", port: 0, onListen() {} },
      async () => new Response((await Deno.open(`${dir}/body`)).readable),
    );
    const text = JSON.stringify({
      id: 2,
      method: "http/request",
      params: { method: "GET", url: `http://127.0.0.1:${http.addr.port}/`, requestId: "" },
    });
    const result = await readOverStdio("", {}, { text, member: "bodyBase64" });
    console.log(
      `streamed ${JSON.stringify({ request: "http/request", mib, growthKib: result.growthKib })}`,
    );
    assert.equal(result.bytes, mib << 20);
    assert.equal(result.digest, digest);
    // The body is held as it arrived until it has all arrived; its base64 is not.
    assert.ok(
      result.growthKib < (mib << 10) + PEAK_GROWTH_BOUND_KIB,
      `peak RSS grew by ${result.growthKib} KiB`,
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

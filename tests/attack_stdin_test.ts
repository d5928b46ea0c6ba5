/**
 * Attack: a client writes to the stdin of a process that never reads it.
 * Every `process/write` used to be answered at once while its chunk waited
 * in the server's memory, so the server held whatever it was sent (125 MiB
 * of writes to `sleep 60`: RSS 55 → 240 MiB). The bytes a process has queued
 * for its stdin are now bounded: beyond {@linkcode MAX_QUEUED_STDIN_BYTES} a
 * write is answered once its chunk has reached the child, so a client that
 * waits for its answers cannot queue more (the reference holds about 6 MiB
 * per process that way).
 *
 * @module
 */

import assert from "node:assert/strict";
import { MAX_QUEUED_STDIN_BYTES } from "../lib/server/process/table.ts";
import { handshake, ServerProcess } from "./helpers/server_harness.ts";

Deno.test("writes to a process that does not read its stdin are answered only up to the queued-stdin bound", async () => {
  await using server = await ServerProcess.start({ listen: "ws" });
  await using client = await server.connect();
  await handshake(client);
  // The child reads nothing, says so after a while (its stdin still open), then exits: its pipe
  // breaks and the held writes end.
  const started = await client.request(1, "process/start", {
    processId: "deaf",
    argv: ["/bin/sh", "-c", "sleep 4; echo waited"],
    cwd: "file:///tmp",
    env: { PATH: "/usr/bin:/bin" },
    tty: false,
    pipeStdin: true,
  });
  assert.ok(started.result, JSON.stringify(started));
  const chunkBytes = 64 * 1024;
  const chunk = new Uint8Array(chunkBytes).toBase64();
  const writes = Math.ceil((MAX_QUEUED_STDIN_BYTES * 2) / chunkBytes);
  for (let i = 0; i < writes; i++) {
    await client.send({
      id: 100 + i,
      method: "process/write",
      params: { processId: "deaf", chunk, writeId: `w${i}` },
    });
  }
  const waited = await client.log.waitFor(
    (msg) => msg.method === "process/output",
    "the child's output",
    30_000,
  );
  const answeredBefore = client.log.received.slice(
    0,
    client.log.received.findIndex((r) => r.msg === waited),
  ).filter((r) => typeof r.msg.id === "number" && r.msg.id >= 100).length;
  await client.log.waitFor((msg) => msg.method === "process/closed", "process/closed", 30_000);
  // The chunks within the bound, one in the pipe's buffer, and the one that crossed the bound.
  assert.ok(
    answeredBefore <= MAX_QUEUED_STDIN_BYTES / chunkBytes + 2,
    `${answeredBefore} of ${writes} writes of 64 KiB were answered while the child read nothing`,
  );
});

/**
 * One inbound message at `--max-message-bytes`, on both of the server's edges: a message of
 * exactly the limit is served; one byte more is answered `-32600` (id -1) naming the limit, and
 * the connection keeps serving. The WebSocket edge reads a frame of up to 60 KiB whole and a
 * larger one in pieces, so it is checked at a limit on each side of that.
 *
 * @module
 */

import assert from "node:assert/strict";
import { InProcessServer, inProcessSession } from "./helpers/in_process_server.ts";
import { handshake, type Json, type ProtocolClient } from "./helpers/server_harness.ts";

/** An `environment/status` request of exactly `bytes` bytes of (ASCII) JSON text. */
function statusOfBytes(id: number, bytes: number): string {
  const bare = JSON.stringify({ id, method: "environment/status", pad: "" });
  return JSON.stringify({ id, method: "environment/status", pad: "p".repeat(bytes - bare.length) });
}

/** Sends a message of `limit` bytes, then one of `limit + 1`, then a small request; returns the three replies. */
async function atAndOver(client: ProtocolClient, limit: number): Promise<Json[]> {
  const from = client.log.received.length;
  await client.sendRaw(statusOfBytes(1, limit));
  await client.sendRaw(statusOfBytes(2, limit + 1));
  await client.sendRaw(JSON.stringify({ id: 3, method: "environment/status" }));
  const replies = () => client.log.received.slice(from).map((r) => r.msg);
  await client.log.waitUntil(() => replies().length >= 3, "three replies");
  return replies();
}

function assertAtAndOver(replies: Json[], limit: number, prefix: string): void {
  assert.deepEqual(replies[0], { id: 1, result: { status: "ready" } });
  assert.deepEqual(replies[1], {
    id: -1,
    error: { code: -32600, message: `${prefix}: message exceeds the limit of ${limit} bytes` },
  });
  assert.deepEqual(replies[2], { id: 3, result: { status: "ready" } });
}

Deno.test("stdio: a line of exactly --max-message-bytes is served; one byte more gets -32600 naming the limit", async () => {
  await using server = await inProcessSession({ maxMessageBytes: 1000 });
  const replies = await atAndOver(server.stdio, 1000);
  assertAtAndOver(replies, 1000, "failed to parse JSON-RPC message from exec-server stdio");
});

for (const limit of [1000, 100_000]) {
  Deno.test(`WebSocket: a message of exactly --max-message-bytes ${limit} is served; one byte more gets -32600 naming the limit`, async () => {
    await using server = await InProcessServer.websocket({ maxMessageBytes: limit });
    await using client = await server.connect();
    await handshake(client);
    const replies = await atAndOver(client, limit);
    const error = (replies[1]!.error as { message: string }).message;
    // The prefix names the client's own address.
    const prefix =
      /^failed to parse websocket JSON-RPC message from exec-server websocket 127\.0\.0\.1:\d+/
        .exec(error)?.[0];
    assert.ok(prefix, error);
    assertAtAndOver(replies, limit, prefix);
  });
}

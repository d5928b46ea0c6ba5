/**
 * The outbound high-water mark at its bound (`OUTBOUND_HIGH_WATER_BYTES`, 8 MiB): while the
 * peer takes nothing, a `send` that leaves exactly 8 MiB queued resolves at once and one that
 * leaves one more waits until the peer has taken enough. Stdio counts the characters of queued
 * messages; the server's WebSocket edge counts the bytes of queued frames (header included),
 * Both hold a message of `BULK_MESSAGE_BYTES` or more to `BULK_QUEUED_BYTES` (256 KiB) instead,
 * so the 8 MiB bound is met with a small message behind queued bulk output.
 *
 * @module
 */

import assert from "node:assert/strict";
import { BULK_QUEUED_BYTES, OUTBOUND_HIGH_WATER_BYTES } from "../lib/rpc/transport.ts";
import { OutboundQueue } from "../lib/rpc/outbound_queue.ts";
import { websocketConnTransport } from "../lib/server/listen/websocket_conn.ts";

/** Header of a server (unmasked) frame whose payload is 65 536 bytes or more. */
const LONG_FRAME_HEADER = 10;

async function settle(rounds = 5): Promise<void> {
  for (let i = 0; i < rounds; i++) await new Promise((resolve) => setTimeout(resolve, 0));
}

/**
 * Sends `text` while the peer takes nothing, then lets it take everything; returns in which
 * order the send resolved and the first write completed.
 */
async function orderOfSend(
  send: (text: string) => Promise<void>,
  release: () => void,
  text: string,
): Promise<string[]> {
  const order: string[] = [];
  const sent = send(text).then(() => order.push("send resolved"));
  await settle();
  order.push("peer took the first write");
  release();
  await sent;
  return order;
}

/** An {@linkcode OutboundQueue} at its default mark whose writes complete when the test says. */
function blockedQueue() {
  const writes: PromiseWithResolvers<void>[] = [];
  const queue = new OutboundQueue(() => {
    const write = Promise.withResolvers<void>();
    writes.push(write);
    return write.promise;
  }, () => assert.fail("no write error expected"));
  return {
    send: (text: string) => queue.push(text),
    release: () => writes.forEach((write) => write.resolve()),
    close: () => queue.close(),
  };
}

/** A connection whose writes complete when the test says and that is never read from. */
function blockedConn() {
  const writes: (() => void)[] = [];
  const closed = Promise.withResolvers<null>();
  const conn = {
    read: () => closed.promise,
    write(bytes: Uint8Array): Promise<number> {
      return new Promise((resolve) => writes.push(() => resolve(bytes.length)));
    },
    close: () => closed.resolve(null),
  } as unknown as Deno.Conn;
  const transport = websocketConnTransport(conn, { label: "blocked", maxMessageBytes: 1024 });
  return {
    send: (text: string) => transport.send(text),
    release: () => writes.splice(0).forEach((write) => write()),
    close: () => conn.close(),
  };
}

/** A small message: under 126 characters (over WebSocket, a frame with a 2-byte header). */
const SMALL = "s".repeat(100);

Deno.test("stdio: a small message that leaves exactly 8 Mi characters queued resolves while the peer takes nothing", async () => {
  const peer = blockedQueue();
  // Each message is one line: its newline is written, not counted.
  void peer.send("x".repeat(OUTBOUND_HIGH_WATER_BYTES - SMALL.length));
  const order = await orderOfSend(peer.send, peer.release, SMALL);
  assert.deepEqual(order, ["send resolved", "peer took the first write"]);
  peer.close();
});

Deno.test("stdio: a small message that leaves 8 Mi + 1 characters queued waits until the peer takes it", async () => {
  const peer = blockedQueue();
  void peer.send("x".repeat(OUTBOUND_HIGH_WATER_BYTES - SMALL.length + 1));
  const order = await orderOfSend(peer.send, peer.release, SMALL);
  assert.deepEqual(order, ["peer took the first write", "send resolved"]);
  peer.close();
});

Deno.test("stdio: a bulk message that leaves exactly 256 Ki characters queued resolves while the peer takes nothing", async () => {
  const peer = blockedQueue();
  const order = await orderOfSend(peer.send, peer.release, "x".repeat(BULK_QUEUED_BYTES));
  assert.deepEqual(order, ["send resolved", "peer took the first write"]);
  peer.close();
});

Deno.test("stdio: a bulk message that leaves 256 Ki + 1 characters queued waits until the peer takes it", async () => {
  const peer = blockedQueue();
  const order = await orderOfSend(peer.send, peer.release, "x".repeat(BULK_QUEUED_BYTES + 1));
  assert.deepEqual(order, ["peer took the first write", "send resolved"]);
  peer.close();
});

/** Queues bulk output that leaves `free` bytes below the high-water mark for {@linkcode SMALL}. */
function queueBulk(peer: { send(text: string): Promise<void> }, free: number): void {
  void peer.send("x".repeat(OUTBOUND_HIGH_WATER_BYTES - LONG_FRAME_HEADER - free));
}

Deno.test("WebSocket edge: a small frame that leaves exactly 8 MiB queued resolves while the peer takes nothing", async () => {
  const peer = blockedConn();
  queueBulk(peer, SMALL.length + 2);
  const order = await orderOfSend(peer.send, peer.release, SMALL);
  assert.deepEqual(order, ["send resolved", "peer took the first write"]);
  peer.close();
});

Deno.test("WebSocket edge: a small frame that leaves 8 MiB + 1 bytes queued waits until the peer takes it", async () => {
  const peer = blockedConn();
  queueBulk(peer, SMALL.length + 1);
  const order = await orderOfSend(peer.send, peer.release, SMALL);
  assert.deepEqual(order, ["peer took the first write", "send resolved"]);
  peer.close();
});

Deno.test("WebSocket edge: a bulk frame that leaves exactly 256 KiB queued resolves while the peer takes nothing", async () => {
  const peer = blockedConn();
  const text = "x".repeat(BULK_QUEUED_BYTES - LONG_FRAME_HEADER);
  const order = await orderOfSend(peer.send, peer.release, text);
  assert.deepEqual(order, ["send resolved", "peer took the first write"]);
  peer.close();
});

Deno.test("WebSocket edge: a bulk frame that leaves 256 KiB + 1 bytes queued waits until the peer takes it", async () => {
  const peer = blockedConn();
  const text = "x".repeat(BULK_QUEUED_BYTES - LONG_FRAME_HEADER + 1);
  const order = await orderOfSend(peer.send, peer.release, text);
  assert.deepEqual(order, ["peer took the first write", "send resolved"]);
  peer.close();
});

/**
 * The outbound high-water mark at its bound (`OUTBOUND_HIGH_WATER_BYTES`, 8 MiB): while the
 * peer takes nothing, a `send` that leaves exactly 8 MiB queued resolves at once and one that
 * leaves one more waits until the peer has taken enough. Stdio counts the characters of queued
 * messages; the server's WebSocket edge counts the bytes of queued frames (header included).
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

/**
 * The two queues, and what each counts for a message beyond its text: nothing on stdio (the
 * newline is written, not counted), the frame's header on the WebSocket edge.
 */
const PEERS = [
  { name: "stdio", open: blockedQueue, unit: "characters", overhead: (_length: number) => 0 },
  {
    name: "WebSocket edge",
    open: blockedConn,
    unit: "bytes",
    overhead: (length: number) => length < 126 ? 2 : LONG_FRAME_HEADER,
  },
] as const;

/** Each bound: a small message's (behind bulk output, which waits at its own mark) and a bulk one's. */
const BOUNDS = [
  { kind: "small", bound: OUTBOUND_HIGH_WATER_BYTES, label: "8 Mi" },
  { kind: "bulk", bound: BULK_QUEUED_BYTES, label: "256 Ki" },
] as const;

for (const { name, open, unit, overhead } of PEERS) {
  for (const { kind, bound, label } of BOUNDS) {
    for (const over of [0, 1]) {
      const leaves = over === 0 ? `exactly ${label} ${unit}` : `${label} + 1 ${unit}`;
      const outcome = over === 0
        ? "resolves while the peer takes nothing"
        : "waits until the peer takes it";
      Deno.test(`${name}: a ${kind} message that leaves ${leaves} queued ${outcome}`, async () => {
        const peer = open();
        /** Text that takes `size` of the queue. */
        const filler = (size: number) => "x".repeat(size - overhead(size));
        const total = bound + over;
        // A small message goes behind bulk output filling the rest (which waits at its own mark).
        const bulk = kind === "small" ? total - SMALL.length - overhead(SMALL.length) : total;
        if (kind === "small") void peer.send(filler(bulk));
        const text = kind === "small" ? SMALL : filler(bulk);
        const order = await orderOfSend(peer.send, peer.release, text);
        assert.deepEqual(
          order,
          over === 0
            ? ["send resolved", "peer took the first write"]
            : ["peer took the first write", "send resolved"],
        );
        peer.close();
      });
    }
  }
}

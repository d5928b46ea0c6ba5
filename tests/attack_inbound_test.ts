/**
 * Attack: a client floods requests and never reads the replies. With
 * `--concurrent-requests 1` the connection stops reading once 128 messages
 * wait; with a higher value, requests used to leave the bounded queue at once
 * and wait for a semaphore permit outside any bound, so the server read (and
 * held) everything it was sent (RSS 50 → 418 MiB for 300 000 requests at
 * `--concurrent-requests 4`). Requests waiting for a permit now count toward
 * the same 128-message bound at every concurrency.
 *
 * @module
 */

import assert from "node:assert/strict";
import { Connection, INBOUND_QUEUE_LIMIT } from "../lib/rpc/connection.ts";
import { Semaphore } from "../lib/rpc/semaphore.ts";
import type { Inbound, Transport } from "../lib/rpc/transport.ts";
import { rssKib, sleep } from "./helpers/reliability_proc.ts";
import { handshake, type ProtocolClient, ServerProcess } from "./helpers/server_harness.ts";
import { InProcessServer } from "./helpers/in_process_server.ts";
import { sh, startProcess } from "./helpers/rpc.ts";

/** A transport whose peer offers `total` requests and never reads a reply. */
function floodingTransport(total: number): Transport & { pulled(): number } {
  let pulled = 0;
  const readable = new ReadableStream<Inbound>({
    pull(controller) {
      // Stop producing without ending the stream (EOF would drop the queue).
      if (pulled === total) return;
      pulled++;
      controller.enqueue(JSON.stringify({ id: pulled, method: "m" }));
    },
  }, { highWaterMark: 0 });
  const never = new Promise<void>(() => {});
  return {
    readable,
    // The peer never reads: every reply waits forever.
    send: () => never,
    close() {},
    parseErrorPrefix: "flood",
    label: "flood",
    pulled: () => pulled,
  };
}

async function settle(rounds = 20): Promise<void> {
  for (let i = 0; i < rounds; i++) await new Promise((resolve) => setTimeout(resolve, 0));
}

for (const concurrency of [1, 4, 64]) {
  Deno.test(`a connection reads at most ${INBOUND_QUEUE_LIMIT} requests ahead of unsent replies at concurrency ${concurrency}`, async () => {
    const transport = floodingTransport(10_000);
    const lane = new Semaphore(concurrency);
    const conn = new Connection(transport, {
      handlers: {
        request: () => null,
        schedule: () => concurrency === 1 ? "inline" : lane,
      },
    });
    await settle();
    const pulled = transport.pulled();
    conn.close();
    await conn.closed;
    // `concurrency` requests hold a permit (blocked sending their reply); the rest wait in the bound.
    assert.ok(
      pulled <= INBOUND_QUEUE_LIMIT + concurrency + 2,
      `read ${pulled} of 10000 requests while no reply could be sent`,
    );
  });
}

Deno.test("a stdio client flooding requests at --concurrent-requests 4 without reading is throttled", async () => {
  await using server = await ServerProcess.start({
    listen: "stdio",
    manualStdout: true,
    args: ["--concurrent-requests", "4"],
  });
  const writer = server.child.stdin.getWriter();
  const encoder = new TextEncoder();
  const stdout = server.child.stdout.getReader();
  await writer.write(encoder.encode(
    `{"id":0,"method":"initialize","params":{"clientName":"flood"}}\n{"method":"initialized"}\n`,
  ));
  await stdout.read();
  const idle = rssKib(server.pid);
  const total = 100_000;
  let written = 0;
  const pad = "p".repeat(1000);
  const writing = (async () => {
    for (let id = 1; id <= total; id += 256) {
      let text = "";
      for (let i = id; i < Math.min(id + 256, total + 1); i++) {
        text += `{"id":${i},"method":"environment/info","pad":"${pad}"}\n`;
      }
      await writer.write(encoder.encode(text));
      written = Math.min(id + 255, total);
    }
  })().catch(() => {});
  // Nobody reads stdout: once the pipes and the bounded queue are full, the writes stall.
  let stalled = -1;
  for (let round = 0; round < 60 && stalled < 0 && written < total; round++) {
    const before = written;
    await sleep(1000);
    if (written > 0 && written === before && written < total) stalled = written;
  }
  const peak = rssKib(server.pid);
  console.log(
    `attack ${JSON.stringify({ stalledAt: stalled, total, idleKib: idle, peakKib: peak })}`,
  );
  assert.ok(stalled > 0, `the server read all ${written} requests although no reply was read`);
  // About 100 MiB of requests were offered; what the server holds stays well below that.
  assert.ok(peak - idle < 96 * 1024, `RSS grew from ${idle} to ${peak} KiB`);
  server.kill("SIGKILL");
  await writer.abort().catch(() => {});
  await stdout.cancel().catch(() => {});
  await writing;
});

/** `environment/status`: the request whose admission the held-text tests watch. */
const STATUS = JSON.stringify({ id: 900, method: "environment/status" });

/**
 * Long-polling `process/read`s of process `held` (ids 800-803) whose texts total `chars`
 * characters: three of 500 and one of the rest.
 */
function paddedReads(chars: number): string[] {
  return [500, 500, 500, chars - 1500].map((length, i) => {
    const read = {
      id: 800 + i,
      method: "process/read",
      params: { processId: "held", waitMs: 60_000 },
    };
    const bare = JSON.stringify({ ...read, pad: "" });
    return JSON.stringify({ ...read, pad: "p".repeat(length - bare.length) });
  });
}

/**
 * A server (in this process) at `--max-message-bytes 1000` (so 2 000 characters of requests may
 * be held) and `--concurrent-requests 64`, running process `held`, which prints once `dir/go`
 * exists; its client has sent reads of it and then {@linkcode STATUS}, `chars` characters in all.
 */
async function heldServer(
  listen: "stdio" | "ws",
  dir: string,
  chars: number,
): Promise<{ client: ProtocolClient } & AsyncDisposable> {
  const options = { maxMessageBytes: 1000, concurrentRequests: 64 };
  const server = listen === "stdio"
    ? InProcessServer.stdio(options)
    : await InProcessServer.websocket(options);
  const client: ProtocolClient = server.stdio ?? await server.connect();
  await handshake(client);
  await startProcess(client, "held", sh(`until [ -e ${dir}/go ]; do sleep 0.05; done; echo out`));
  for (const text of [...paddedReads(chars - STATUS.length), STATUS]) await client.sendRaw(text);
  return {
    client,
    async [Symbol.asyncDispose]() {
      if (!server.stdio) await client.close();
      await server.stop();
    },
  };
}

/** Where the reply to `id` is in what the client received (-1: not yet). */
function replyIndex(client: ProtocolClient, id: number): number {
  return client.log.received.findIndex((r) => r.msg.id === id && !("method" in r.msg));
}

for (const listen of ["stdio", "ws"] as const) {
  Deno.test(`a ${listen} server at --max-message-bytes 1000 admits a request that brings the held text to exactly 2000 characters`, async () => {
    const dir = await Deno.makeTempDir({ prefix: "es-held-" });
    try {
      await using held = await heldServer(listen, dir, 2000);
      // Answered while all four reads still wait for output.
      await held.client.log.waitUntil(() => replyIndex(held.client, 900) >= 0, "the status reply");
      for (let id = 800; id < 804; id++) assert.equal(replyIndex(held.client, id), -1);
      await Deno.writeTextFile(`${dir}/go`, "");
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  });

  Deno.test(`a ${listen} server at --max-message-bytes 1000 reads no request that would take the held text to 2001 characters until one is answered`, async () => {
    const dir = await Deno.makeTempDir({ prefix: "es-held-" });
    try {
      await using held = await heldServer(listen, dir, 2001);
      // Time for a server without the bound to answer (it would fail the order below).
      await sleep(300);
      assert.equal(replyIndex(held.client, 900), -1, "answered while the reads held 2000");
      await Deno.writeTextFile(`${dir}/go`, "");
      await held.client.log.waitUntil(() => replyIndex(held.client, 900) >= 0, "the status reply");
      assert.ok(replyIndex(held.client, 800) < replyIndex(held.client, 900));
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  });
}

/**
 * Attacks on the connection edge, by anyone who can reach the port and
 * holds no token:
 *
 * - unfinished request heads used to be held forever (2 000 of 2 000 still
 *   open after 35 s); now a connection must finish its upgrade within the
 *   handshake timeout, and at most 1 024 wait for that at once (the oldest
 *   is closed for a newer one), so an authenticated client still gets in;
 * - at the descriptor limit `accept` failed and the server exited with code
 *   1; now the failure is logged and `accept` retried;
 * - `--max-connections` bounds upgraded connections (503 beyond);
 * - the soft `RLIMIT_NOFILE` is at the hard limit (the Deno runtime raises it
 *   at start; pinned here because the descriptor budget depends on it).
 *
 * The 2 000-connection variant runs under `EXEC_SERVER_LONG_TESTS=1`; CI runs
 * the same attack with 300 connections.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  HANDSHAKE_TIMEOUT_MS,
  MAX_PENDING_CONNECTIONS,
  serveWebSocket,
} from "../lib/server/listen/listen.ts";
import { readRequestHead } from "../lib/server/listen/http_head.ts";
import {
  handshake,
  MAIN_TS,
  SERVER_PERMISSIONS,
  ServerProcess,
  WsClient,
} from "./helpers/server_harness.ts";
import { fdCount, sleep, waitUntil } from "./helpers/reliability_proc.ts";
import { RawWebSocket } from "./helpers/reliability_server.ts";

const LONG = Deno.env.get("EXEC_SERVER_LONG_TESTS") === "1";

/** Opens `count` TCP connections that send half a request head and then nothing. */
async function halfOpen(port: number, count: number): Promise<Deno.TcpConn[]> {
  const conns: Deno.TcpConn[] = [];
  const partial = new TextEncoder().encode("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n");
  for (let i = 0; i < count; i++) {
    const conn = await Deno.connect({ hostname: "127.0.0.1", port });
    await conn.write(partial);
    conns.push(conn);
  }
  return conns;
}

function closeAll(conns: Deno.Conn[]): void {
  for (const conn of conns) {
    try {
      conn.close();
    } catch {
      // Closed by the server already.
    }
  }
}

/**
 * True once the server has closed this connection (a read sees EOF or a
 * reset); false if it is still open after 20 s (the old server never closed
 * it), so the test fails instead of hanging.
 */
async function closedByServer(conn: Deno.Conn): Promise<boolean> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const read = conn.read(new Uint8Array(1024)).then((n) => n === null, () => true);
  const stillOpen = new Promise<false>((
    resolve,
  ) => (timer = setTimeout(() => resolve(false), 20_000)));
  try {
    return await Promise.race([read, stillOpen]);
  } finally {
    clearTimeout(timer);
  }
}

/** Connects with the bearer token and runs one command to completion. */
async function servedWithToken(port: number, token: string): Promise<void> {
  await using raw = await RawWebSocket.connect(port, {
    headers: { Authorization: `Bearer ${token}` },
  });
  assert.equal(raw.answer.status, 101);
  await raw.sendText(`{"id":0,"method":"initialize","params":{"clientName":"real"}}`);
  assert.ok(JSON.parse((await raw.readMessage())!).result);
  await raw.sendText(`{"method":"initialized"}`);
  await raw.sendText(`{"id":1,"method":"environment/status"}`);
  assert.deepEqual(JSON.parse((await raw.readMessage())!), {
    id: 1,
    result: { status: "ready" },
  });
}

for (
  const { count, soft, hard } of [{ count: 600, soft: 256, hard: 512 }, {
    count: 2000,
    soft: 1024,
    hard: 1024,
  }]
) {
  Deno.test({
    name: `an authenticated client is served while ${count} half-open connections sit there` +
      ` (RLIMIT_NOFILE ${soft}/${hard})` +
      (count > 600 && !LONG ? " (skipped: long run only, set EXEC_SERVER_LONG_TESTS=1)" : ""),
    ignore: count > 600 && !LONG,
    fn: async () => {
      const dir = await Deno.makeTempDir({ prefix: "es-edge-" });
      const token = crypto.getRandomValues(new Uint8Array(32)).toHex();
      await Deno.writeTextFile(`${dir}/token`, token);
      const server = await startWithFileLimit(soft, hard, [
        "--ws-auth",
        "capability-token",
        "--ws-token-file",
        `${dir}/token`,
      ]);
      let conns: Deno.TcpConn[] = [];
      try {
        conns = await halfOpen(server.port, count);
        await servedWithToken(server.port, token);
        await servedWithToken(server.port, token);
      } finally {
        closeAll(conns);
        await Deno.remove(dir, { recursive: true });
        const status = await server.stop();
        const stderr = await server.stderr;
        assert.equal(status.code, 0, `the server did not run until stopped:\n${stderr}`);
      }
    },
  });
}

Deno.test("a connection that does not finish its request head is closed after the handshake timeout", async () => {
  const server = await serveWebSocket({ handshakeTimeoutMs: 200 });
  const port = Number(new URL(server.url).port);
  const conns = await halfOpen(port, 5);
  try {
    for (const conn of conns) assert.ok(await closedByServer(conn));
    // A client that completes its handshake is not affected by the timer.
    const client = await WsClient.connect(server.url);
    await handshake(client);
    await sleep(400);
    const status = await client.request(1, "environment/status");
    assert.deepEqual(status.result, { status: "ready" });
    await client.close();
  } finally {
    closeAll(conns);
    await server.shutdown();
  }
});

/** Sends `bytes` on `conn`, reads the answer to its end; returns the answer's status line. */
async function statusLineAfter(conn: Deno.Conn, bytes: string): Promise<string> {
  await conn.write(new TextEncoder().encode(bytes));
  let answer = "";
  const buffer = new Uint8Array(4096);
  for (let n = await conn.read(buffer); n !== null; n = await conn.read(buffer)) {
    answer += new TextDecoder().decode(buffer.subarray(0, n));
  }
  return answer.split("\r\n")[0]!;
}

/** Sends `bytes` on a new connection; returns the status line of the answer. */
async function statusLineFor(port: number, bytes: string): Promise<string> {
  const conn = await Deno.connect({ hostname: "127.0.0.1", port });
  try {
    return await statusLineAfter(conn, bytes);
  } finally {
    closeAll([conn]);
  }
}

Deno.test("a request head of 64 KiB is answered; one byte more gets 431", async () => {
  const server = await serveWebSocket({});
  const port = Number(new URL(server.url).port);
  try {
    const start = "GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: ";
    const atLimit = start + "a".repeat(64 * 1024 - start.length);
    assert.equal(await statusLineFor(port, `${atLimit}\r\n\r\n`), "HTTP/1.1 200 OK");
    // One byte more and all but the last byte of the blank line: exactly what the server reads
    // before it gives up, so nothing is left unread to turn its close into a reset.
    assert.equal(
      await statusLineFor(port, `${atLimit}a\r\n\r`),
      "HTTP/1.1 431 Request Header Fields Too Large",
    );
  } finally {
    await server.shutdown();
  }
});

Deno.test("the listener's defaults are a 10 s handshake timeout and 1 024 pending connections", () => {
  // The tests around this one exercise both rules at small values through the same options.
  assert.equal(HANDSHAKE_TIMEOUT_MS, 10_000);
  assert.equal(MAX_PENDING_CONNECTIONS, 1024);
});

Deno.test("at most maxPendingConnections wait for their upgrade: a newer one closes the oldest", async () => {
  const server = await serveWebSocket({ maxPendingConnections: 4 });
  const port = Number(new URL(server.url).port);
  const conns = await halfOpen(port, 6);
  try {
    assert.ok(await closedByServer(conns[0]!), "the oldest was closed");
    assert.ok(await closedByServer(conns[1]!), "the second oldest was closed");
    // The four newest still wait: finishing their heads gets each one an answer.
    for (const conn of conns.slice(2)) {
      assert.equal(await statusLineAfter(conn, "\r\n"), "HTTP/1.1 400 Bad Request");
    }
    const client = await WsClient.connect(server.url);
    await handshake(client);
    await client.close();
  } finally {
    closeAll(conns);
    await server.shutdown();
  }
});

Deno.test("--max-connections refuses a further upgrade with 503 until a connection ends", async () => {
  await using server = await ServerProcess.start({
    listen: "ws",
    args: ["--max-connections", "2"],
  });
  const first = await server.connect();
  const second = await server.connect();
  await handshake(first);
  await handshake(second);
  {
    await using third = await RawWebSocket.connect(server.port);
    assert.equal(third.answer.status, 503);
  }
  await first.close();
  await waitUntil(async () => {
    await using retry = await RawWebSocket.connect(server.port);
    return retry.answer.status === 101;
  }, 10_000);
  await second.close();
});

/** Starts the server under `sh -c 'ulimit -n …; exec deno …'`. */
function startWithFileLimit(
  soft: number,
  hard: number,
  args: string[] = [],
): Promise<ServerProcess> {
  return ServerProcess.start({
    listen: "ws",
    args,
    command: [
      "/bin/sh",
      "-c",
      `ulimit -Sn ${soft} && ulimit -Hn ${hard} && exec "$@"`,
      "sh",
      Deno.execPath(),
      "run",
      ...SERVER_PERMISSIONS,
      MAIN_TS,
    ],
  });
}

Deno.test("the soft RLIMIT_NOFILE is at the hard limit once the server runs (Deno raises it at start)", async () => {
  await using server = await startWithFileLimit(256, 4096);
  const limits = await Deno.readTextFile(`/proc/${server.pid}/limits`);
  const line = limits.split("\n").find((l) => l.startsWith("Max open files"))!;
  assert.match(line, /^Max open files\s+4096\s+4096\s+files/);
});

Deno.test("accept failing with EMFILE is logged and survived; the server serves again afterwards", async () => {
  // Soft and hard limit 96: the server cannot raise it; 150 connections exhaust it.
  const server = await startWithFileLimit(96, 96);
  const conns: Deno.TcpConn[] = [];
  try {
    const client = await WsClient.connect(server.url);
    await handshake(client);
    const idle = fdCount(server.pid);
    for (let i = 0; i < 150; i++) {
      conns.push(await Deno.connect({ hostname: "127.0.0.1", port: server.port }));
    }
    // The descriptors are used up (or the oldest unfinished handshakes were closed to free one).
    await waitUntil(() => fdCount(server.pid) >= 90 || conns.length === 150, 10_000);
    closeAll(conns);
    await waitUntil(() => fdCount(server.pid) <= idle + 2, 20_000);
    // The listener is still there: a new client is served, and the old one was never dropped.
    const again = await WsClient.connect(server.url);
    await handshake(again);
    assert.deepEqual((await again.request(1, "environment/status")).result, { status: "ready" });
    assert.deepEqual((await client.request(5, "environment/status")).result, { status: "ready" });
    await again.close();
    await client.close();
  } finally {
    closeAll(conns);
    const status = await server.stop();
    const stderr = await server.stderr;
    assert.match(stderr, /accept failed, retrying: .*os error 24/);
    assert.equal(status.code, 0, `the server did not run until stopped:\n${stderr}`);
  }
});

Deno.test("a request head is found at its blank line wherever the reads split it, the bytes read after it kept", async () => {
  const text = "GET / HTTP/1.1\r\nHost: a\r\nX-Cr: \r\r\n\r\nearly";
  const bytes = new TextEncoder().encode(text);
  for (let split = 1; split < bytes.length; split++) {
    const chunks = [bytes.subarray(0, split), bytes.subarray(split)];
    const conn = {
      read: (buffer: Uint8Array) => {
        const chunk = chunks.shift();
        if (chunk === undefined) return Promise.resolve(null);
        buffer.set(chunk);
        return Promise.resolve(chunk.length);
      },
    };
    const head = await readRequestHead(conn as unknown as Deno.Conn);
    assert.ok(typeof head === "object", `split at ${split}: ${head}`);
    // A CR that starts no blank line is passed over (and trimmed from the value).
    assert.equal(head.headers.get("x-cr"), "", `split at ${split}`);
    assert.equal(head.headers.get("host"), "a");
    // What came after the blank line in the reads that found it.
    const headBytes = text.indexOf("\r\n\r\n") + 4;
    const rest = text.slice(headBytes, split >= headBytes ? split : text.length);
    assert.equal(new TextDecoder().decode(head.rest), rest, `split at ${split}`);
  }
});

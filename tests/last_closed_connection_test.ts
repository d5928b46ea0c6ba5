import assert from "node:assert/strict";
import { Connection } from "../lib/rpc/connection.ts";
import { stdioTransport } from "../lib/rpc/stdio_transport.ts";
import { keepLastClosed, lastClosed } from "../lib/server/session/last_closed.ts";
import { eventually, handshake, pidAlive, pidsMatching } from "./helpers/server_harness.ts";
import { InProcessServer } from "./helpers/in_process_server.ts";
import { sh, startProcess } from "./helpers/rpc.ts";

Deno.test("the server keeps only its last closed connection: the next close replaces it", async () => {
  await using server = await InProcessServer.websocket();
  const before = lastClosed();
  const a = await server.connect();
  await handshake(a);
  await a.close();
  assert.ok(await eventually(() => lastClosed() !== before), "the closed connection is kept");
  const first = lastClosed()!;
  assert.ok(first.isClosed);
  const b = await server.connect();
  await handshake(b);
  await b.close();
  assert.ok(await eventually(() => lastClosed() !== first), "the next close replaces it");
  assert.ok(lastClosed()!.isClosed);
});

Deno.test("keepLastClosed refuses a connection that is still open", async () => {
  const pipe = new TransformStream<Uint8Array, Uint8Array>();
  const open = new Connection(stdioTransport(pipe.readable, pipe.writable));
  assert.throws(() => keepLastClosed(open), {
    name: "TypeError",
    message: "Cannot keep an open connection",
  });
  open.close();
  await open.closed;
});

Deno.test("a kept closed connection does not keep its session: its processes die at the TTL", async () => {
  await using server = await InProcessServer.websocket({ ttlMs: 200 });
  const tag = String(Math.floor(Math.random() * 1e9));
  const before = lastClosed();
  const a = await server.connect();
  await handshake(a);
  await startProcess(a, "p", sh(`exec sleep 1000.${tag}`));
  assert.ok(await eventually(() => pidsMatching(`sleep 1000.${tag}`).length === 1));
  const [pid] = pidsMatching(`sleep 1000.${tag}`);
  await a.close();
  assert.ok(await eventually(() => lastClosed() !== before), "the closed connection is kept");
  assert.ok(await eventually(() => !pidAlive(pid!), 15_000), "the process died at the TTL");
  assert.ok(await eventually(() => server.server.sessions.size === 0), "the session is gone");
});

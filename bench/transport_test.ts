import { deepStrictEqual as assertEquals } from "node:assert";
import { connectWebSocket } from "./transport.ts";
import { readRequestHead } from "../lib/server/listen/http_head.ts";
import { websocketConnTransport, writeUpgrade } from "../lib/server/listen/websocket_conn.ts";

Deno.test("connectWebSocket() round-trips messages of every frame length encoding", async () => {
  const ac = new AbortController();
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, signal: ac.signal, onListen() {} },
    (req) => {
      const { socket, response } = Deno.upgradeWebSocket(req);
      socket.onmessage = (e) => socket.send(`echo:${e.data}`);
      return response;
    },
  );
  const transport = await connectWebSocket(`ws://127.0.0.1:${server.addr.port}`);
  const received: string[] = [];
  const sizes = [0, 1, 125, 126, 65535, 65536, 300_000];
  const { promise, resolve } = Promise.withResolvers<void>();
  transport.onMessage = (text) => {
    received.push(text);
    if (received.length === sizes.length) resolve();
  };
  for (const n of sizes) transport.send("x".repeat(n));
  await promise;
  assertEquals(received.map((t) => t.length), sizes.map((n) => n + 5));
  assertEquals(received[0], "echo:");
  transport.close();
  await transport.closed;
  ac.abort();
  await server.finished;
});

Deno.test("connectWebSocket() masks every frame with a fresh non-zero key that the server's unmasking undoes", async () => {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const connecting = connectWebSocket(`ws://127.0.0.1:${listener.addr.port}`);
  const conn = await listener.accept();
  listener.close();
  const head = await readRequestHead(conn);
  if (typeof head === "string") throw new Error(`no request head: ${head}`);
  await writeUpgrade(conn, head.headers);
  const client = await connecting;
  // Each frame-length form, and lengths that leave a partial last word.
  const texts = [0, 1, 5, 32, 125, 126, 1001, 65535, 65536].map((n) =>
    Array.from({ length: n }, (_, i) => String.fromCharCode(97 + (i * 7) % 26)).join("")
  );
  for (const text of texts) client.send(text);
  // Read the raw frames as the client wrote them and collect their masking keys.
  let bytes = head.rest.slice();
  const keys: number[] = [];
  let at = 0;
  const chunk = new Uint8Array(64 * 1024);
  while (keys.length < texts.length) {
    const short = bytes.length - at >= 2 ? bytes[at + 1]! & 0x7f : -1;
    const keyAt = at + (short === 127 ? 10 : short === 126 ? 4 : 2);
    if (short >= 0 && bytes.length >= keyAt + 4) {
      const length = short === 127
        ? Number(new DataView(bytes.buffer, bytes.byteOffset + at + 2, 8).getBigUint64(0))
        : short === 126
        ? (bytes[at + 2]! << 8) | bytes[at + 3]!
        : short;
      if (bytes.length >= keyAt + 4 + length) {
        assertEquals(bytes[at + 1]! & 0x80, 0x80, "the mask bit is set");
        keys.push(new DataView(bytes.buffer, bytes.byteOffset + keyAt, 4).getUint32(0));
        at = keyAt + 4 + length;
        continue;
      }
    }
    const n = await conn.read(chunk);
    if (n === null) throw new Error("the client closed before sending every frame");
    const grown = new Uint8Array(bytes.length + n);
    grown.set(bytes);
    grown.set(chunk.subarray(0, n), bytes.length);
    bytes = grown;
  }
  assertEquals(keys.filter((key) => key === 0), [], "no frame has the all-zero key");
  assertEquals(new Set(keys).size, keys.length, "every frame has its own key");
  // The server's transport, handed the same bytes, unmasks each message back to what was sent.
  const server = websocketConnTransport(conn, {
    label: "test",
    maxMessageBytes: 1 << 20,
    initial: bytes,
  });
  const received: unknown[] = [];
  for (const _ of texts) received.push(await server.receive!());
  assertEquals(received, texts);
  server.close();
  client.close();
  await client.closed;
});

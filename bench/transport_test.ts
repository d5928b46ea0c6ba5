import { deepStrictEqual as assertEquals } from "node:assert";
import { connectWebSocket } from "./transport.ts";

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

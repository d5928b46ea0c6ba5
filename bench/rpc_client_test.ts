import { deepStrictEqual as assertEquals, rejects } from "node:assert";
import { base64DecodedLength, RpcClient, RpcError } from "./rpc_client.ts";
import type { Transport } from "./transport.ts";

function fakeTransport(): Transport & { sent: string[] } {
  const sent: string[] = [];
  return {
    sent,
    send: (text) => void sent.push(text),
    onMessage: () => {},
    closed: new Promise(() => {}),
    close: () => {},
  };
}

Deno.test("RpcClient resolves and rejects calls by id", async () => {
  const transport = fakeTransport();
  const client = new RpcClient(transport);
  const ok = client.call("fs/getMetadata", { path: "file:///tmp" });
  const bad = client.call("process/read", { processId: "x" });
  assertEquals(transport.sent, [
    '{"id":1,"method":"fs/getMetadata","params":{"path":"file:///tmp"}}',
    '{"id":2,"method":"process/read","params":{"processId":"x"}}',
  ]);
  transport.onMessage('{"id":2,"error":{"code":-32600,"message":"unknown process id x"}}');
  transport.onMessage('{"id":1,"result":{"isDirectory":true}}');
  assertEquals(await ok, { isDirectory: true });
  await rejects(bad, (err) => err instanceof RpcError && err.code === -32600);
});

Deno.test("RpcClient routes process events, output without parsing", () => {
  const transport = fakeTransport();
  const client = new RpcClient(transport);
  const events: unknown[] = [];
  client.watch("p1", {
    onOutput: (chunk, seq) => events.push(["output", chunk, seq]),
    onExited: (code) => events.push(["exited", code]),
    onClosed: () => events.push(["closed"]),
  });
  transport.onMessage(
    '{"method":"process/output","params":{"processId":"p1","seq":1,"stream":"stdout","chunk":"aGkK"}}',
  );
  transport.onMessage(
    '{"method":"process/output","params":{"processId":"other","seq":1,"stream":"stdout","chunk":"eA=="}}',
  );
  // A different member order still works (falls back to JSON.parse when the prefix differs).
  transport.onMessage(
    '{"params":{"chunk":"eQ==","seq":2,"stream":"stderr","processId":"p1"},"method":"process/output"}',
  );
  transport.onMessage(
    '{"method":"process/exited","params":{"processId":"p1","seq":3,"exitCode":0,"sandboxDenied":false}}',
  );
  transport.onMessage('{"method":"process/closed","params":{"processId":"p1","seq":4}}');
  assertEquals(events, [
    ["output", "aGkK", 1],
    ["output", "eQ==", 2],
    ["exited", 0],
    ["closed"],
  ]);
  assertEquals(client.fastPathMessages, 2);
});

Deno.test("base64DecodedLength() accounts for padding", () => {
  for (const n of [0, 1, 2, 3, 4, 5, 8191, 8192]) {
    const b64 = new Uint8Array(n).toBase64();
    assertEquals(base64DecodedLength(b64), n);
  }
});

import assert from "node:assert/strict";
import type { Inbound, Transport } from "../lib/rpc/transport.ts";
import {
  websocketTransport,
  type WebSocketTransportOptions,
} from "../lib/rpc/websocket_transport.ts";
import { serveUpgrades } from "./helpers/upgrade_server.ts";

interface Loopback extends AsyncDisposable {
  /** The server-side transport. */
  server: Transport;
  /** The raw client socket. */
  client: WebSocket;
  /** Messages the client received, in order. */
  received: (string | ArrayBuffer)[];
  /** Resolves after the client saw `count` messages. */
  waitReceived(count: number): Promise<void>;
}

/** Starts a WebSocket server on 127.0.0.1:0 and connects a raw client socket to it. */
async function loopback(options: WebSocketTransportOptions = {}): Promise<Loopback> {
  const serverSide = Promise.withResolvers<Transport>();
  const endpoint = await serveUpgrades((socket) =>
    serverSide.resolve(websocketTransport(socket, options))
  );
  const client = new WebSocket(endpoint.url);
  client.binaryType = "arraybuffer";
  const received: (string | ArrayBuffer)[] = [];
  let wake: (() => void) | undefined;
  client.onmessage = (event) => {
    received.push(event.data);
    wake?.();
  };
  const clientClosed = new Promise((resolve) => client.addEventListener("close", resolve));
  await new Promise((resolve, reject) => {
    client.onopen = resolve;
    client.onerror = reject;
  });
  const server = await serverSide.promise;
  return {
    server,
    client,
    received,
    async waitReceived(count) {
      while (received.length < count) await new Promise<void>((resolve) => (wake = resolve));
    },
    async [Symbol.asyncDispose]() {
      if (client.readyState !== WebSocket.CLOSED) {
        client.close();
        await clientClosed;
      }
      server.close();
      await endpoint[Symbol.asyncDispose]();
    },
  };
}

async function take(
  reader: ReadableStreamDefaultReader<Inbound>,
  count: number,
): Promise<Inbound[]> {
  const out: Inbound[] = [];
  for (let i = 0; i < count; i++) {
    const { value, done } = await reader.read();
    if (done) break;
    out.push(value);
  }
  return out;
}

Deno.test("websocketTransport reads text and binary messages as message text", async () => {
  await using lb = await loopback();
  const reader = lb.server.readable.getReader();
  lb.client.send('{"id":1,"method":"environment/status"}');
  lb.client.send(new TextEncoder().encode('{"id":2,"method":"environment/status"}'));
  lb.client.send("");
  lb.client.send("   ");
  assert.deepEqual(await take(reader, 4), [
    '{"id":1,"method":"environment/status"}',
    '{"id":2,"method":"environment/status"}',
    "",
    "   ",
  ], "empty and whitespace-only messages are passed on (unlike stdio)");
  reader.releaseLock();
});

Deno.test("websocketTransport faults on a binary message with invalid UTF-8", async () => {
  await using lb = await loopback();
  const reader = lb.server.readable.getReader();
  lb.client.send(new Uint8Array([0x7b, 0xff, 0x7d]));
  lb.client.send("{}");
  assert.deepEqual(await take(reader, 2), [{ fault: "invalid UTF-8 in binary message" }, "{}"]);
  reader.releaseLock();
});

Deno.test("websocketTransport faults on a message over the size limit", async () => {
  await using lb = await loopback({ maxMessageBytes: 8 });
  const reader = lb.server.readable.getReader();
  lb.client.send("123456789");
  lb.client.send(new Uint8Array(9));
  lb.client.send("12345678");
  assert.deepEqual(await take(reader, 3), [
    { fault: "message exceeds the limit of 8 bytes", limit: 8 },
    { fault: "message exceeds the limit of 8 bytes", limit: 8 },
    "12345678",
  ]);
  reader.releaseLock();
});

Deno.test("websocketTransport names the id of an over-limit response, read from its first bytes", async () => {
  await using lb = await loopback({ maxMessageBytes: 16 });
  const reader = lb.server.readable.getReader();
  lb.client.send('{"id":7,"result":"xxxxxxxxxxxx"}');
  lb.client.send(new TextEncoder().encode('{"id":9007199254740993,"error":{}}'));
  lb.client.send('{"id":8,"method":"x","params":{}}');
  const fault = "message exceeds the limit of 16 bytes";
  assert.deepEqual(await take(reader, 3), [
    { fault, limit: 16, responseId: 7 },
    { fault, limit: 16, responseId: 9007199254740993n },
    { fault, limit: 16 },
  ]);
  reader.releaseLock();
});

Deno.test("websocketTransport counts the size limit of text messages in UTF-8 bytes", async () => {
  await using lb = await loopback({ maxMessageBytes: 8 });
  const reader = lb.server.readable.getReader();
  lb.client.send("€€€"); // 3 characters, 9 bytes
  lb.client.send("€€"); // 6 bytes
  assert.deepEqual(await take(reader, 2), [
    { fault: "message exceeds the limit of 8 bytes", limit: 8 },
    "€€",
  ]);
  reader.releaseLock();
});

Deno.test("websocketTransport sends each message as one text frame without a newline", async () => {
  await using lb = await loopback();
  await lb.server.send('{"id":1,"result":{}}');
  await lb.server.send('{"method":"process/closed","params":{"processId":"p","seq":2}}');
  await lb.waitReceived(2);
  assert.deepEqual(lb.received, [
    '{"id":1,"result":{}}',
    '{"method":"process/closed","params":{"processId":"p","seq":2}}',
  ]);
});

Deno.test("websocketTransport labels parse errors with the peer", async () => {
  await using lb = await loopback({ label: "exec-server websocket 127.0.0.1:5555" });
  assert.equal(lb.server.label, "exec-server websocket 127.0.0.1:5555");
  assert.equal(
    lb.server.parseErrorPrefix,
    "failed to parse websocket JSON-RPC message from exec-server websocket 127.0.0.1:5555",
  );
});

Deno.test("websocketTransport readable ends when the peer closes", async () => {
  await using lb = await loopback();
  const reader = lb.server.readable.getReader();
  lb.client.send("last");
  lb.client.close();
  assert.deepEqual(await reader.read(), { done: false, value: "last" });
  assert.deepEqual(await reader.read(), { done: true, value: undefined });
  reader.releaseLock();
  await lb.server.send("ignored after close");
});

Deno.test("websocketTransport close() ends the client's connection", async () => {
  await using lb = await loopback();
  const closed = new Promise((resolve) => lb.client.addEventListener("close", resolve));
  lb.server.close();
  lb.server.close();
  await closed;
  assert.equal(lb.client.readyState, WebSocket.CLOSED);
});

Deno.test("websocketTransport on a connecting client socket sends once it opens", async () => {
  const got = Promise.withResolvers<string>();
  await using endpoint = await serveUpgrades((socket) => {
    socket.onmessage = (event) => got.resolve(event.data);
  });
  const socket = new WebSocket(endpoint.url);
  const transport = websocketTransport(socket);
  assert.equal(socket.readyState, WebSocket.CONNECTING);
  await transport.send('{"id":1,"method":"early"}');
  assert.equal(await got.promise, '{"id":1,"method":"early"}');
  const closed = new Promise((resolve) => socket.addEventListener("close", resolve));
  transport.close();
  await closed;
});

Deno.test("websocketTransport closes a peer whose unprocessed messages exceed the inbound limit", async () => {
  await using pair = await loopback({ maxQueuedBytes: 1000 });
  const closed = new Promise((resolve) => pair.client.addEventListener("close", resolve));
  // Nobody reads the server's readable: the messages pile up.
  for (let i = 0; i < 50; i++) pair.client.send(JSON.stringify({ id: i, pad: "x".repeat(100) }));
  await closed;
  const reader = pair.server.readable.getReader();
  let count = 0;
  while (!(await reader.read()).done) count++;
  assert.ok(count < 50, `all ${count} messages were kept`);
});

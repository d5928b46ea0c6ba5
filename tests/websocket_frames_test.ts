import assert from "node:assert/strict";
import { handshake, ServerProcess } from "./helpers/server_harness.ts";
import { websocketConnTransport } from "../lib/server/listen/websocket_conn.ts";
import type { Transport } from "../lib/rpc/transport.ts";
import { encodeFrame, RawWebSocket } from "./helpers/reliability_server.ts";
import { serveWebSocket } from "../lib/server/listen/listen.ts";
import { concatBytes } from "../lib/rpc/bytes.ts";

// The server's text frames carry their JSON encoded straight into the frame for ASCII text, and
// encoded then framed otherwise; both, at each of the three frame-length forms (7-bit, 16-bit
// and 64-bit), must arrive as the same JSON the server meant.

Deno.test("WebSocket replies arrive whole for ASCII and non-ASCII text of every frame-length form", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await using server = await ServerProcess.start({ listen: "ws" });
    await using client = await server.connect();
    await handshake(client);
    let id = 10;
    for (const size of [10, 200, 70_000]) {
      const content = "a".repeat(size);
      const path = `${dir}/${size}.txt`;
      await Deno.writeTextFile(path, content);
      const reply = await client.request(++id, "fs/readFile", { path: `file://${path}` });
      const base64 = (reply.result as { dataBase64: string }).dataBase64;
      assert.equal(new TextDecoder().decode(Uint8Array.fromBase64(base64)), content);
    }
    // Non-ASCII reply text: directory entries named with accents, one short and many long.
    for (const count of [1, 400]) {
      const sub = `${dir}/d${count}`;
      await Deno.mkdir(sub);
      const names = Array.from(
        { length: count },
        (_, i) => `é✓${i}`.padEnd(count > 1 ? 60 : 3, "ü"),
      );
      for (const name of names) await Deno.writeTextFile(`${sub}/${name}`, "");
      const reply = await client.request(++id, "fs/readDirectory", { path: `file://${sub}` });
      const entries = (reply.result as { entries: { fileName: string }[] }).entries;
      assert.deepEqual(entries.map((entry) => entry.fileName).sort(), names.sort());
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

/** A server-side WebSocket transport on one end of a loopback TCP pair, and the other end. */
async function transportPair(): Promise<
  { client: Deno.Conn; transport: Transport; writes: () => number }
> {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const client = await Deno.connect({ hostname: "127.0.0.1", port: listener.addr.port });
  const server = await listener.accept();
  listener.close();
  let writes = 0;
  const counted = {
    read: (buffer: Uint8Array) => server.read(buffer),
    write: (bytes: Uint8Array) => (writes++, server.write(bytes)),
    close: () => server.close(),
  };
  const transport = websocketConnTransport(counted as unknown as Deno.Conn, {
    label: "test",
    maxMessageBytes: 1 << 20,
  });
  return { client, transport, writes: () => writes };
}

Deno.test("WebSocket frames are unmasked whole, fragmented and at every buffer alignment", async () => {
  const { client, transport } = await transportPair();
  const reader = transport.readable.getReader();
  try {
    const texts: string[] = [];
    const frames: Uint8Array[] = [];
    // Lengths around the word loop's threshold and each frame-length form; odd lengths shift the
    // next frame's payload off a 4-byte boundary of the read buffer.
    for (const length of [0, 1, 5, 31, 32, 33, 37, 125, 126, 1001, 65535, 65536, 70_003]) {
      const text = Array.from({ length }, (_, i) => String.fromCharCode(97 + (i * 7) % 26)).join(
        "",
      );
      texts.push(text);
      frames.push(encodeFrame(0x1, new TextEncoder().encode(text), true));
    }
    // The all-zero mask (which leaves the payload as it is).
    texts.push("zero mask ".repeat(10));
    frames.push(encodeFrame(0x1, new TextEncoder().encode(texts.at(-1)!), true, new Uint8Array(4)));
    // One message in three fragments of odd sizes.
    const fragmented = "fragmented-".repeat(3000);
    const bytes = new TextEncoder().encode(fragmented);
    texts.push(fragmented);
    frames.push(encodeFrame(0x1, bytes.subarray(0, 333), false));
    frames.push(encodeFrame(0x0, bytes.subarray(333, 20_001), false));
    frames.push(encodeFrame(0x0, bytes.subarray(20_001), true));
    const writing = (async () => {
      for (const frame of frames) {
        let written = 0;
        while (written < frame.length) written += await client.write(frame.subarray(written));
      }
    })();
    for (const text of texts) {
      const { value } = await reader.read();
      assert.equal(value, text);
    }
    await writing;
  } finally {
    reader.releaseLock();
    transport.close();
    client.close();
  }
});

Deno.test("WebSocket text sent with U+FFFD arrives as sent; a binary message of invalid UTF-8 is a fault; invalid UTF-8 text closes with 1007", async () => {
  const { client, transport } = await transportPair();
  const reader = transport.readable.getReader();
  try {
    const replacement = `{"text":"${"\uFFFD".repeat(3)}${"x".repeat(6000)}"}`;
    const invalid = new Uint8Array([0x7b, 0xff, 0xfe, 0x7d]);
    for (
      const frame of [
        encodeFrame(0x1, new TextEncoder().encode(replacement), true),
        encodeFrame(0x2, invalid, true),
        encodeFrame(0x1, invalid, true),
      ]
    ) await client.write(frame);
    assert.equal((await reader.read()).value, replacement);
    assert.deepEqual((await reader.read()).value, { fault: "invalid UTF-8 in binary message" });
    assert.equal((await reader.read()).done, true);
    // A close frame with status 1007 (read until its first four bytes are in).
    const close = new Uint8Array(64);
    let got = 0;
    while (got < 4) {
      const n = await client.read(close.subarray(got));
      if (n === null) break;
      got += n;
    }
    assert.deepEqual([...close.subarray(0, Math.min(got, 4))], [0x88, close[1], 0x03, 0xef]);
  } finally {
    reader.releaseLock();
    transport.close();
    client.close();
  }
});

Deno.test("WebSocket writes a lone answer at once, but not while another request is read ahead", async () => {
  const { client, transport, writes } = await transportPair();
  const reader = transport.readable.getReader();
  try {
    const frame = (text: string) => encodeFrame(0x1, new TextEncoder().encode(text), true);
    // Two requests in one TCP write: the second is read ahead when the first is answered.
    const both = new Uint8Array([...frame('{"id":1}'), ...frame('{"id":2}')]);
    await client.write(both);
    assert.equal((await reader.read()).value, '{"id":1}');
    void transport.send('{"id":1,"result":1}', true);
    assert.equal(writes(), 0, "held for the end of the turn");
    await new Promise((resolve) => setTimeout(resolve, 0));
    assert.equal(writes(), 1);
    assert.equal((await reader.read()).value, '{"id":2}');
    void transport.send('{"id":2,"result":2}', true);
    assert.equal(writes(), 2, "nothing read ahead: written within the call");
    void transport.send('{"method":"n"}');
    assert.equal(writes(), 2, "a message not alone waits");
    const expected = [0x81, 19, ...new TextEncoder().encode('{"id":1,"result":1}')];
    expected.push(0x81, 19, ...new TextEncoder().encode('{"id":2,"result":2}'));
    expected.push(0x81, 14, ...new TextEncoder().encode('{"method":"n"}'));
    const got = new Uint8Array(expected.length);
    let at = 0;
    while (at < got.length) {
      const n = await client.read(got.subarray(at));
      if (n === null) break;
      at += n;
    }
    assert.deepEqual([...got], expected);
  } finally {
    reader.releaseLock();
    transport.close();
    client.close();
  }
});

Deno.test("WebSocket receive hands over a message whose frame is already read at once, and null at the end", async () => {
  const { client, transport } = await transportPair();
  try {
    const frame = (text: string) => encodeFrame(0x1, new TextEncoder().encode(text), true);
    await client.write(new Uint8Array([...frame("one"), ...frame("two")]));
    const first = transport.receive!();
    assert.ok(first instanceof Promise, "nothing read yet: a promise");
    assert.equal(await first, "one");
    assert.equal(transport.receive!(), "two", "read with the first: at once");
    client.close();
    assert.equal(await transport.receive!(), null);
    assert.equal(transport.receive!(), null, "and null again");
  } finally {
    transport.close();
  }
});

Deno.test("WebSocket frames sent in the same write as the upgrade request are answered in order", async () => {
  const server = await serveWebSocket();
  const text = (message: unknown) =>
    encodeFrame(0x1, new TextEncoder().encode(JSON.stringify(message)), true);
  const early = concatBytes([
    text({ id: 1, method: "initialize", params: { clientName: "early" } }),
    text({ method: "initialized" }),
    text({ id: 2, method: "fs/getMetadata", params: { path: "file:///" } }),
  ]);
  const socket = await RawWebSocket.connect(Number(new URL(server.url).port), { early });
  let timer: ReturnType<typeof setTimeout> | undefined;
  // Bytes the server lost would leave the reads waiting: fail after 10 s instead of hanging.
  const lost = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error("no answer to the early frames")), 10_000);
  });
  try {
    assert.equal(socket.answer.status, 101);
    const first = JSON.parse((await Promise.race([socket.readMessage(), lost]))!);
    const second = JSON.parse((await Promise.race([socket.readMessage(), lost]))!);
    assert.equal(first.id, 1);
    assert.equal(typeof first.result.sessionId, "string");
    assert.equal(second.id, 2);
    assert.equal(second.result.isDirectory, true);
  } finally {
    clearTimeout(timer);
    await socket[Symbol.asyncDispose]();
    await server.shutdown();
  }
});

/**
 * Streamed replies, piece by piece: a {@linkcode StreamedJson} keeps the object's member
 * order; the WebSocket edge sends it as one message in fragments with nothing else between
 * them but control frames, and stops at a close frame; the stdio queue writes it as one line
 * that later messages follow; a reply dropped unsent, or a stream cut short, closes what its
 * chunks hold.
 *
 * @module
 */

import assert from "node:assert/strict";
import { StreamedJson, StreamedString } from "../lib/protocol/streamed_json.ts";
import { Connection } from "../lib/rpc/connection.ts";
import { OutboundQueue } from "../lib/rpc/outbound_queue.ts";
import type { Inbound, Outbound, Transport } from "../lib/rpc/transport.ts";
import { FrameWriter } from "../lib/server/listen/frame_writer.ts";

const decoder = new TextDecoder();

/** A connection that takes every write at once and keeps a copy. */
function recordingConn(): { conn: Deno.Conn; bytes: () => Uint8Array } {
  const writes: Uint8Array[] = [];
  const conn = {
    write: (bytes: Uint8Array) => (writes.push(bytes.slice()), Promise.resolve(bytes.length)),
  };
  return {
    conn: conn as unknown as Deno.Conn,
    bytes: () => {
      const all = new Uint8Array(writes.reduce((n, w) => n + w.length, 0));
      let at = 0;
      for (const w of writes) all.set(w, (at += w.length) - w.length);
      return all;
    },
  };
}

/** Server frames as [fin, opcode, payload text]. */
function frames(bytes: Uint8Array): [boolean, number, string][] {
  const out: [boolean, number, string][] = [];
  let at = 0;
  while (at < bytes.length) {
    let length = bytes[at + 1]! & 0x7f;
    let start = at + 2;
    if (length === 126) {
      length = (bytes[at + 2]! << 8) | bytes[at + 3]!;
      start = at + 4;
    } else if (length === 127) {
      length = Number(new DataView(bytes.buffer, bytes.byteOffset + at + 2).getBigUint64(0));
      start = at + 10;
    }
    const payload = decoder.decode(bytes.subarray(start, start + length));
    out.push([(bytes[at]! & 0x80) !== 0, bytes[at]! & 0x0f, payload]);
    at = start + length;
  }
  return out;
}

/** Chunks that wait at `gate` after the first; `closed` is set when the generator finishes. */
function gatedChunks(gate: Promise<void>, state: { closed: boolean }, fail = false) {
  return (async function* () {
    try {
      yield "AAAA";
      await gate;
      if (fail) throw new Error("read failed");
      yield "BBBB";
    } finally {
      state.closed = true;
    }
  })();
}

/** A frame writer streaming `{"d":"AAAA` and waiting at `gate` before `BBBB"}`. */
async function streamingWriter() {
  const { conn, bytes } = recordingConn();
  const writer = new FrameWriter(conn, 1 << 20, () => {});
  const gate = Promise.withResolvers<void>();
  const state = { closed: false };
  const chunks = new StreamedString(gatedChunks(gate.promise, state));
  const streaming = writer.stream(new StreamedJson('{"d":"', chunks, '"}'));
  await tick();
  return { writer, bytes, gate, state, streaming };
}

const tick = () => new Promise<void>((resolve) => setTimeout(resolve, 0));

Deno.test("StreamedJson keeps the object's member order around the streamed member, and is undefined for a plain one", async () => {
  async function* chunks() {
    yield "aGk=";
  }
  const json = StreamedJson.of({ a: 1, data: new StreamedString(chunks()), z: [2] }, "data")!;
  let text = json.head;
  for await (const chunk of json.string.take()) text += chunk;
  assert.equal(text + json.tail, '{"a":1,"data":"aGk=","z":[2]}');
  assert.equal(StreamedJson.of({ data: "plain" }, "data"), undefined);
});

Deno.test("WebSocket edge: a streamed message goes in fragments; a ping may come between them, a text frame waits for the last", async () => {
  const { writer, bytes, gate, state, streaming } = await streamingWriter();
  const after = writer.text("after");
  void writer.frame(0x9, new TextEncoder().encode("p"));
  gate.resolve();
  await streaming;
  await after;
  await writer.idle();
  assert.deepEqual(frames(bytes()), [
    [false, 0x1, '{"d":"'],
    [false, 0x0, "AAAA"],
    [true, 0x9, "p"],
    [false, 0x0, "BBBB"],
    [true, 0x0, '"}'],
    [true, 0x1, "after"],
  ]);
  assert.ok(state.closed);
});

Deno.test("WebSocket edge: a close frame queued during a streamed message ends it; no data frame follows the close", async () => {
  const { writer, bytes, gate, state, streaming } = await streamingWriter();
  void writer.text("held");
  void writer.frame(0x8, new Uint8Array([0x03, 0xe8]));
  gate.resolve();
  await streaming;
  await writer.idle();
  const sent = frames(bytes());
  assert.deepEqual(sent.map(([, opcode]) => opcode), [0x1, 0x0, 0x8]);
  assert.ok(state.closed, "the chunks were closed");
});

Deno.test("WebSocket edge: a chunk that fails closes the connection (the message cannot be finished)", async () => {
  const { conn } = recordingConn();
  let failed = 0;
  const writer = new FrameWriter(conn, 1 << 20, () => failed++);
  const gate = Promise.withResolvers<void>();
  const state = { closed: false };
  const chunks = gatedChunks(gate.promise, state, true);
  const streaming = writer.stream(new StreamedJson("[", new StreamedString(chunks), "]"));
  gate.resolve();
  await streaming;
  assert.equal(failed, 1);
  assert.ok(state.closed);
});

Deno.test("stdio queue: a streamed message is one line; a message sent meanwhile follows it", async () => {
  const written: string[] = [];
  const queue = new OutboundQueue(async (text) => {
    written.push(text);
    await tick();
  }, () => {});
  const gate = Promise.withResolvers<void>();
  const state = { closed: false };
  void queue.push("before");
  const streaming = queue.push(
    new StreamedJson('{"d":"', new StreamedString(gatedChunks(gate.promise, state)), '"}'),
  );
  await tick();
  await tick();
  const after = queue.push("after");
  gate.resolve();
  await streaming;
  await after;
  while (written.join("").split("\n").length < 4) await tick();
  assert.equal(written.join(""), 'before\n{"d":"AAAABBBB"}\nafter\n');
  assert.ok(state.closed);
});

Deno.test("stdio queue: a chunk that fails reports the write error once and closes the chunks", async () => {
  let errors = 0;
  const queue = new OutboundQueue(() => Promise.resolve(), () => errors++);
  const gate = Promise.withResolvers<void>();
  const state = { closed: false };
  const sent = queue.push(
    new StreamedJson("[", new StreamedString(gatedChunks(gate.promise, state, true)), "]"),
  );
  gate.resolve();
  await sent;
  await tick();
  assert.equal(errors, 1);
  assert.ok(state.closed);
});

/** A transport that takes messages until closed and drops what comes after. */
class DroppingTransport implements Transport {
  sent: Outbound[] = [];
  #inbound: (Inbound | null)[] = [];
  #wake: (() => void) | undefined;
  readonly parseErrorPrefix = "test";
  readonly label = "test";
  readonly readable = new ReadableStream<Inbound>();
  push(message: Inbound | null): void {
    this.#inbound.push(message);
    this.#wake?.();
  }
  async receive(): Promise<Inbound | null> {
    while (this.#inbound.length === 0) await new Promise<void>((r) => (this.#wake = r));
    return this.#inbound.shift()!;
  }
  send(message: Outbound): Promise<void> {
    this.sent.push(message);
    return Promise.resolve();
  }
  close(): void {}
}

Deno.test("a streamed reply that no transport took (the connection closed first) releases what its chunks hold", async () => {
  const transport = new DroppingTransport();
  let released = 0;
  const answered = Promise.withResolvers<StreamedJson>();
  const held: { connection?: Connection } = {};
  held.connection = new Connection(transport, {
    handlers: {
      request: async () => {
        // The reply is made while the connection closes.
        held.connection!.close();
        await tick();
        const json = new StreamedJson(
          "[",
          new StreamedString(gatedChunks(tick(), { closed: false }), () => released++),
          "]",
        );
        answered.resolve(json);
        return json;
      },
    },
  });
  transport.push(JSON.stringify({ id: 1, method: "x" }));
  await answered.promise;
  await tick();
  await tick();
  assert.equal(released, 1);
  assert.deepEqual(transport.sent, []);
});

Deno.test("a streamed reply a transport let go of without taking its chunks releases what they hold", async () => {
  const transport = new DroppingTransport();
  let released = 0;
  const connection = new Connection(transport, {
    handlers: {
      request: () =>
        new StreamedJson(
          "[",
          new StreamedString(gatedChunks(tick(), { closed: false }), () => released++),
          "]",
        ),
    },
  });
  transport.push(JSON.stringify({ id: 1, method: "x" }));
  while (transport.sent.length === 0) await tick();
  await tick();
  assert.equal(released, 1);
  const sent = transport.sent[0] as StreamedJson;
  assert.equal(sent.head, '{"id":1,"result":[');
  assert.equal(sent.tail, "]}");
  connection.close();
});

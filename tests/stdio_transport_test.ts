import assert from "node:assert/strict";
import { decodeMessage } from "../lib/protocol/envelope.ts";
import { LineSplitStream } from "./helpers/line_split_stream.ts";
import { OutboundQueue } from "../lib/rpc/outbound_queue.ts";
import { type ByteReader, type ByteWriter, stdioTransport } from "../lib/rpc/stdio_transport.ts";
import type { Inbound } from "../lib/rpc/transport.ts";
import { serveStdio } from "../lib/server/listen/stdio_listen.ts";

const encoder = new TextEncoder();

function bytes(...parts: (string | number[])[]): Uint8Array[] {
  return parts.map((part) =>
    typeof part === "string" ? encoder.encode(part) : new Uint8Array(part)
  );
}

async function split(chunks: Uint8Array[], maxLineBytes?: number): Promise<Inbound[]> {
  return await Array.fromAsync(
    ReadableStream.from(chunks).pipeThrough(new LineSplitStream({ maxLineBytes })),
  );
}

Deno.test("LineSplitStream joins a line split across reads", async () => {
  assert.deepEqual(await split(bytes('{"id":', "1,", '"method":"m"}\n')), [
    '{"id":1,"method":"m"}',
  ]);
});

Deno.test("LineSplitStream splits several lines in one read", async () => {
  assert.deepEqual(await split(bytes('{"a":1}\n{"b":2}\n{"c":3}\n')), [
    '{"a":1}',
    '{"b":2}',
    '{"c":3}',
  ]);
});

Deno.test("LineSplitStream keeps a multi-byte character split across reads", async () => {
  const euro = encoder.encode('"€"\n');
  assert.deepEqual(await split([euro.subarray(0, 2), euro.subarray(2, 3), euro.subarray(3)]), [
    '"€"',
  ]);
});

Deno.test("LineSplitStream tolerates CRLF line endings", async () => {
  const lines = await split(bytes('{"id":1,"method":"m"}\r\n{"id":2,"method":"m"}\r\n'));
  assert.equal(lines.length, 2);
  for (const line of lines) {
    assert.equal(typeof line, "string");
    assert.equal(decodeMessage(line as string).kind, "request", "a trailing CR is JSON whitespace");
  }
});

Deno.test("LineSplitStream ignores blank and whitespace-only lines", async () => {
  assert.deepEqual(await split(bytes("\n\n   \n\t\n\r\n \r\n", '{"a":1}\n', "\n")), ['{"a":1}']);
});

Deno.test("LineSplitStream emits a final unterminated line at EOF", async () => {
  assert.deepEqual(await split(bytes('{"a":1}\n{"b"', ":2}")), ['{"a":1}', '{"b":2}']);
});

Deno.test("LineSplitStream faults once for an over-long line and resyncs at the next newline", async (t) => {
  await t.step("a long line inside one read", async () => {
    assert.deepEqual(await split(bytes(`${"x".repeat(20)}\n{"ok":1}\n`), 10), [
      { fault: "message exceeds the limit of 10 bytes", limit: 10 },
      '{"ok":1}',
    ]);
  });
  await t.step("a long line spread over many reads gives exactly one fault", async () => {
    const chunks = bytes("aaaa", "bbbb", "cccc", "dddd", "eeee\nnext\n");
    assert.deepEqual(await split(chunks, 10), [
      { fault: "message exceeds the limit of 10 bytes", limit: 10 },
      "next",
    ]);
  });
  await t.step("a line of exactly the limit is accepted", async () => {
    assert.deepEqual(await split(bytes(`${"y".repeat(10)}\n`), 10), ["y".repeat(10)]);
  });
  await t.step("the limit counts bytes, not characters", async () => {
    // 4 euro signs = 12 bytes.
    assert.deepEqual(await split(bytes("€€€€\n€€€\n"), 10), [
      { fault: "message exceeds the limit of 10 bytes", limit: 10 },
      "€€€",
    ]);
  });
});

Deno.test("LineSplitStream names the id of an over-long response, read from its first bytes", async () => {
  const fault = (responseId?: number | string) =>
    responseId === undefined
      ? { fault: "message exceeds the limit of 16 bytes", limit: 16 }
      : { fault: "message exceeds the limit of 16 bytes", limit: 16, responseId };
  assert.deepEqual(
    await split(
      bytes(
        '{"id":7,"res',
        'ult":"xxxxxxxxxxxx"}\n',
        '{"jsonrpc":"2.0","id":"a","error":{}}\n',
        '{"id":8,"method":"x","params":{}}\n',
        '{"result":"xxxxxxxx","id":9}\n',
      ),
      16,
    ),
    [fault(7), fault("a"), fault(), fault()],
  );
});

Deno.test("LineSplitStream faults on invalid UTF-8 and keeps going", async () => {
  const chunks = [
    ...bytes('{"a":"'),
    new Uint8Array([0xff, 0xfe]),
    ...bytes('"}\n{"b":1}\n'),
    new Uint8Array([0xc3, 0x28, 0x0a]),
    ...bytes("last\n"),
  ];
  assert.deepEqual(await split(chunks), [
    { fault: "invalid UTF-8 in message" },
    '{"b":1}',
    { fault: "invalid UTF-8 in message" },
    "last",
  ]);
});

Deno.test("LineSplitStream keeps a leading BOM so the decoder rejects it", async () => {
  const [line] = await split(bytes([0xef, 0xbb, 0xbf], "{}\n"));
  assert.equal(line, "\uFEFF{}");
  assert.throws(() => decodeMessage(line as string), {
    message: /^expected value at line 1 column \d+$/,
  });
});

/** A WritableStream whose writes complete only when the test releases them. */
function slowSink() {
  const written: string[] = [];
  const releases: (() => void)[] = [];
  const decoder = new TextDecoder();
  const stream = new WritableStream<Uint8Array>({
    write(chunk) {
      return new Promise<void>((resolve) => {
        releases.push(() => {
          written.push(decoder.decode(chunk));
          resolve();
        });
      });
    },
  }, { highWaterMark: 1 });
  return {
    stream,
    written,
    /** Completes the oldest pending write; returns false when none is pending. */
    releaseOne(): boolean {
      const release = releases.shift();
      release?.();
      return release !== undefined;
    },
    get pendingWrites(): number {
      return releases.length;
    },
  };
}

async function settle(rounds = 5): Promise<void> {
  for (let i = 0; i < rounds; i++) await new Promise((resolve) => setTimeout(resolve, 0));
}

Deno.test("OutboundQueue applies backpressure above the high-water mark", async () => {
  const writes: PromiseWithResolvers<void>[] = [];
  const texts: string[] = [];
  const queue = new OutboundQueue(
    (text) => {
      texts.push(text);
      const write = Promise.withResolvers<void>();
      writes.push(write);
      return write.promise;
    },
    () => assert.fail("no write error expected"),
    10,
  );
  let small = false;
  await queue.push("12345").then(() => (small = true));
  assert.ok(small, "a push below the mark resolves at once");
  let big = false;
  const pending = queue.push("678901").then(() => (big = true));
  await settle();
  assert.equal(big, false, "a push above the mark waits");
  assert.equal(queue.bufferedAmount, 11);
  writes[0]!.resolve(); // "12345" written
  await settle();
  // The second message is now being written as its own batch: 6 bytes buffered, below 10.
  assert.equal(queue.bufferedAmount, 6);
  await pending;
  assert.equal(big, true);
  writes[1]!.resolve();
  await settle();
  assert.equal(queue.bufferedAmount, 0);
  assert.deepEqual(texts, ["12345\n", "678901\n"]);
});

Deno.test("OutboundQueue batches messages queued while a write is in progress", async () => {
  const writes: PromiseWithResolvers<void>[] = [];
  const texts: string[] = [];
  const queue = new OutboundQueue((text) => {
    texts.push(text);
    const write = Promise.withResolvers<void>();
    writes.push(write);
    return write.promise;
  }, () => {});
  queue.push("a");
  queue.push("b");
  queue.push("c");
  writes[0]!.resolve();
  await settle();
  writes[1]!.resolve();
  await settle();
  assert.deepEqual(texts, ["a\n", "b\nc\n"]);
});

Deno.test("OutboundQueue close drops queued messages and releases waiters", async () => {
  const queue = new OutboundQueue(() => new Promise<void>(() => {}), () => {}, 1);
  const waiting = queue.push("waiting for a write that never completes");
  queue.close();
  await waiting;
  assert.equal(queue.bufferedAmount, 0);
  await queue.push("after close resolves at once");
  assert.equal(queue.bufferedAmount, 0);
});

Deno.test("OutboundQueue reports a failed write once and stops", async () => {
  const errors: unknown[] = [];
  let calls = 0;
  const queue = new OutboundQueue(
    () => {
      calls++;
      return Promise.reject(new Error("broken pipe"));
    },
    (err) => errors.push(err),
    1,
  );
  const waiting = queue.push("xx");
  await waiting;
  await settle();
  await queue.push("later");
  assert.equal(errors.length, 1);
  assert.equal(calls, 1);
});

Deno.test("stdioTransport send() waits while a slow reader lets output pile up: a bulk message above 256 KiB, a small one above 8 MiB", async () => {
  const sink = slowSink();
  const input = new TransformStream<Uint8Array, Uint8Array>();
  const transport = stdioTransport(input.readable, sink.stream);
  const big = "z".repeat(6 * 1024 * 1024);
  const sent: string[] = [];
  const bulk = transport.send(big).then(() => sent.push("bulk"));
  await settle();
  assert.equal(sent.length, 0, "a bulk message waits above BULK_QUEUED_BYTES");
  await transport.send("s"); // 6 MiB + 1 < 8 MiB: a small message does not wait
  const bulk2 = transport.send(big).then(() => sent.push("bulk 2")); // 12 MiB buffered
  const small = transport.send("t").then(() => sent.push("small"));
  await settle();
  assert.equal(sent.length, 0, "a small message waits above the 8 MiB high-water mark");
  while (sent.length < 3) {
    sink.releaseOne();
    await settle(1);
  }
  await Promise.all([bulk, bulk2, small]);
  while (sink.pendingWrites > 0 || sink.written.join("").length < 2 * big.length + 6) {
    sink.releaseOne();
    await settle(1);
  }
  assert.equal(sink.written.join(""), `${big}\ns\n${big}\nt\n`);
  transport.close();
  await input.writable.close().catch(() => {});
});

Deno.test("stdioTransport frames output as one line per message and reads lines", async () => {
  const toServer = new TransformStream<Uint8Array, Uint8Array>();
  const chunks: string[] = [];
  const decoder = new TextDecoder();
  const output = new WritableStream<Uint8Array>({
    write: (c) => void chunks.push(decoder.decode(c)),
  });
  const transport = stdioTransport(toServer.readable, output);
  assert.equal(
    transport.parseErrorPrefix,
    "failed to parse JSON-RPC message from exec-server stdio",
  );
  assert.equal(transport.label, "exec-server stdio");
  await transport.send('{"id":1,"result":{}}');
  await transport.send('{"method":"m"}');
  await settle();
  assert.equal(chunks.join(""), '{"id":1,"result":{}}\n{"method":"m"}\n');
  const writer = toServer.writable.getWriter();
  const reader = transport.readable[Symbol.asyncIterator]();
  // The transport reads its input only when asked for a message (a write waits until then).
  void writer.write(encoder.encode('{"id":2,"method":"x"}\n\n  \n{"id":3'));
  assert.deepEqual(await reader.next(), { done: false, value: '{"id":2,"method":"x"}' });
  void writer.write(encoder.encode(',"method":"y"}\n'));
  assert.deepEqual(await reader.next(), { done: false, value: '{"id":3,"method":"y"}' });
  void writer.close();
  assert.deepEqual(await reader.next(), { done: true, value: undefined });
  transport.close();
});

Deno.test("stdioTransport uses a custom prefix and line limit", async () => {
  const toServer = new TransformStream<Uint8Array, Uint8Array>();
  const transport = stdioTransport(toServer.readable, new WritableStream(), {
    parseErrorPrefix: "custom",
    label: "peer",
    maxLineBytes: 4,
  });
  assert.equal(transport.parseErrorPrefix, "custom");
  assert.equal(transport.label, "peer");
  const writer = toServer.writable.getWriter();
  writer.write(encoder.encode("123456\n1234\n"));
  writer.close();
  assert.deepEqual(await Array.fromAsync(transport.readable), [
    { fault: "message exceeds the limit of 4 bytes", limit: 4 },
    "1234",
  ]);
  transport.close();
});

/** A reader that hands out `input` at most `step` bytes per read, into the caller's buffer. */
function pieceReader(input: Uint8Array, step: number): ByteReader & { reads: number } {
  let at = 0;
  return {
    reads: 0,
    read(buffer: Uint8Array): Promise<number | null> {
      this.reads++;
      if (at >= input.length) return Promise.resolve(null);
      const n = Math.min(step, buffer.length, input.length - at);
      buffer.set(input.subarray(at, at + n));
      at += n;
      return Promise.resolve(n);
    },
  };
}

Deno.test("stdioTransport over a reader keeps lines that span reads intact while it reuses its buffer", async () => {
  const lines = Array.from({ length: 40 }, (_, i) => JSON.stringify({ id: i, pad: "é".repeat(i) }));
  const reader = pieceReader(encoder.encode(lines.join("\n") + "\n"), 7);
  const transport = stdioTransport(reader, { write: (b) => Promise.resolve(b.length), close() {} });
  assert.deepEqual(await Array.fromAsync(transport.readable), lines);
  assert.ok(reader.reads > 40, "lines were split across reads");
  transport.close();
});

Deno.test("stdioTransport over a writer that takes part of each write sends every byte in order, then closes it", async () => {
  const taken: number[] = [];
  let closedAfter = -1;
  const writer: ByteWriter = {
    write(bytes) {
      const n = Math.min(5, bytes.length);
      taken.push(...bytes.subarray(0, n));
      return Promise.resolve(n);
    },
    close() {
      closedAfter = taken.length;
    },
  };
  const transport = stdioTransport(pieceReader(new Uint8Array(0), 1), writer);
  await transport.send('{"id":1,"result":{"text":"αβγ"}}');
  await transport.send(['{"method":', '"m"}']);
  await settle();
  const expected = '{"id":1,"result":{"text":"αβγ"}}\n{"method":"m"}\n';
  assert.equal(new TextDecoder().decode(new Uint8Array(taken)), expected);
  assert.equal(closedAfter, -1, "the writer stays open while the transport is");
  transport.close();
  await settle();
  assert.equal(closedAfter, encoder.encode(expected).length, "closed once, after the last write");
});

Deno.test("a stdio transport whose output fails ends a receive that waits on a pending read", async () => {
  const never: ByteReader = { read: () => new Promise<number | null>(() => {}) };
  const failing: ByteWriter = { write: () => Promise.reject(new Error("EPIPE")), close() {} };
  const transport = stdioTransport(never, failing);
  const pending = transport.receive!();
  transport.send('{"id":1,"result":{}}');
  assert.equal(await pending, null);
});

Deno.test("a stdio server whose output fails finishes, ending its sessions, while its input stays open", async () => {
  const request = encoder.encode('{"id":0,"method":"initialize","params":{"clientName":"t"}}\n');
  let served = false;
  const openInput: ByteReader = {
    read(buffer) {
      if (served) return new Promise<number | null>(() => {});
      served = true;
      buffer.set(request);
      return Promise.resolve(request.length);
    },
  };
  const failing: ByteWriter = { write: () => Promise.reject(new Error("EPIPE")), close() {} };
  const server = serveStdio({}, openInput, failing);
  let timer: ReturnType<typeof setTimeout> | undefined;
  const ended = await Promise.race([
    server.finished.then(() => "finished"),
    new Promise((resolve) => timer = setTimeout(resolve, 10_000, "still running")),
  ]);
  clearTimeout(timer);
  assert.equal(ended, "finished");
});

Deno.test("a stdio transport's reads of a long session keep nothing per read (300 000 lines: heap grows under 32 MB)", async () => {
  const line = encoder.encode('{"id":1,"method":"x"}\n');
  let reads = 0;
  const lines: ByteReader = {
    read(buffer) {
      if (reads++ >= 300_000) return Promise.resolve(null);
      buffer.set(line);
      return Promise.resolve(line.length);
    },
  };
  const transport = stdioTransport(lines, { write: (b) => Promise.resolve(b.length), close() {} });
  const before = Deno.memoryUsage().heapUsed;
  while (await transport.receive!() !== null) { /* drop the message */ }
  const grown = Deno.memoryUsage().heapUsed - before;
  transport.close();
  assert.ok(grown < 32 * 1024 * 1024, `the heap grew ${grown} bytes`);
});

import assert from "node:assert/strict";
import { concatBytes } from "../lib/rpc/bytes.ts";
import { BULK_MESSAGE_BYTES, BULK_QUEUED_BYTES } from "../lib/rpc/transport.ts";
import { BATCH_BYTES, FrameWriter } from "../lib/server/listen/frame_writer.ts";

/** A connection whose writes stay pending until released; records a copy of each write. */
class HeldConn {
  writes: Uint8Array[] = [];
  /** The bytes each write was handed, as they were when it was released. */
  released: Uint8Array[] = [];
  #pending: { bytes: Uint8Array; resolve: (n: number) => void }[] = [];

  write(bytes: Uint8Array): Promise<number> {
    this.writes.push(bytes.slice());
    return new Promise((resolve) => this.#pending.push({ bytes, resolve }));
  }

  /** Completes the oldest pending write in full. */
  release(): boolean {
    const next = this.#pending.shift();
    if (next === undefined) return false;
    this.released.push(next.bytes.slice());
    next.resolve(next.bytes.length);
    return true;
  }

  /** Completes writes as they come until the writer is idle. */
  async releaseAll(writer: FrameWriter): Promise<void> {
    let idle = false;
    const done = writer.idle().then(() => (idle = true));
    while (!idle) {
      await new Promise((resolve) => setTimeout(resolve, 0));
      this.release();
    }
    await done;
  }
}

/** Splits written bytes into frames: [opcode, payload][]. */
function parseFrames(bytes: Uint8Array): [number, Uint8Array][] {
  const frames: [number, Uint8Array][] = [];
  let at = 0;
  while (at < bytes.length) {
    assert.equal(bytes[at]! & 0x80, 0x80, "final frame");
    const opcode = bytes[at]! & 0x0f;
    const short = bytes[at + 1]!;
    assert.equal(short & 0x80, 0, "server frames are not masked");
    let length = short;
    let start = at + 2;
    if (short === 126) {
      length = (bytes[at + 2]! << 8) | bytes[at + 3]!;
      start = at + 4;
    } else if (short === 127) {
      length = Number(new DataView(bytes.buffer, bytes.byteOffset + at + 2, 8).getBigUint64(0));
      start = at + 10;
    }
    frames.push([opcode, bytes.subarray(start, start + length)]);
    at = start + length;
  }
  assert.equal(at, bytes.length, "no bytes between or after frames");
  return frames;
}

const decode = (bytes: Uint8Array) => new TextDecoder().decode(bytes);

Deno.test("frame writer sends text, parts and binary frames in order, each payload exact", async () => {
  const conn = new HeldConn();
  const writer = new FrameWriter(conn as unknown as Deno.Conn, 1 << 30, () => {});
  const texts = [
    "",
    "a".repeat(125),
    "b".repeat(126),
    "c".repeat(65535),
    "d".repeat(65536),
    "héllo ✓ 😀",
    "x".repeat(70_000) + "é",
  ];
  for (const text of texts) void writer.text(text);
  void writer.text(["{", '"k":', '"é"', "}"]);
  void writer.frame(0x2, new Uint8Array([1, 2, 3]));
  await conn.releaseAll(writer);
  const frames = parseFrames(concatBytes(conn.writes));
  assert.deepEqual(
    frames.map(([opcode, payload]) => opcode === 1 ? decode(payload) : [...payload]),
    [...texts, '{"k":"é"}', [1, 2, 3]],
  );
  assert.ok(frames.slice(0, -1).every(([opcode]) => opcode === 1));
});

Deno.test("frame writer never changes the bytes of a write in flight while it queues more", async () => {
  const conn = new HeldConn();
  const writer = new FrameWriter(conn as unknown as Deno.Conn, 1 << 30, () => {});
  // Enough frames to fill several batches and reuse the written ones.
  const texts = Array.from({ length: 40 }, (_, i) => String(i % 10).repeat(90_000));
  for (let i = 0; i < texts.length; i += 4) {
    for (const text of texts.slice(i, i + 4)) void writer.text(text);
    await new Promise((resolve) => setTimeout(resolve, 0));
    conn.release();
  }
  await conn.releaseAll(writer);
  assert.deepEqual(conn.released, conn.writes, "each write's bytes were unchanged until it ended");
  const frames = parseFrames(concatBytes(conn.writes));
  assert.deepEqual(frames.map(([, payload]) => decode(payload)), texts);
});

Deno.test("frame writer batches at most BATCH_BYTES per write, except one larger frame alone", async () => {
  const conn = new HeldConn();
  const writer = new FrameWriter(conn as unknown as Deno.Conn, 1 << 30, () => {});
  for (let i = 0; i < 20; i++) void writer.text("s".repeat(30_000));
  void writer.text("L".repeat(BATCH_BYTES * 2));
  void writer.text("t");
  await conn.releaseAll(writer);
  const sizes = conn.writes.map((w) => w.length);
  assert.ok(sizes.length < 21, `small frames were batched: ${sizes}`);
  const large = sizes.filter((n) => n > BATCH_BYTES);
  assert.deepEqual(large, [BATCH_BYTES * 2 + 10], "the large frame went alone");
  assert.equal(parseFrames(concatBytes(conn.writes)).length, 22);
});

Deno.test("frame writer holds senders above the high-water mark until the queue drains below it", async () => {
  const conn = new HeldConn();
  const writer = new FrameWriter(conn as unknown as Deno.Conn, 100_000, () => {});
  let settled = 0;
  const waits = Array.from(
    { length: 4 },
    () => writer.text("w".repeat(40_000)).then(() => settled++),
  );
  await new Promise((resolve) => setTimeout(resolve, 0));
  assert.equal(settled, 2, "the first two fit under the mark, the others wait");
  await conn.releaseAll(writer);
  await Promise.all(waits);
  assert.equal(settled, 4);
});

Deno.test("frame writer holds bulk frames above BULK_QUEUED_BYTES while a small frame behind them finds room at once", async () => {
  const conn = new HeldConn();
  const writer = new FrameWriter(conn as unknown as Deno.Conn, 8 * BULK_QUEUED_BYTES, () => {});
  const settled: string[] = [];
  const chunk = "b".repeat(BULK_MESSAGE_BYTES * 4);
  const frames = Math.ceil(BULK_QUEUED_BYTES / chunk.length) + 2;
  const bulk = Array.from(
    { length: frames },
    (_, i) => writer.text(chunk).then(() => settled.push(`bulk ${i}`)),
  );
  const small = writer.text('{"method":"process/output","params":{"chunk":"YQ=="}}').then(() =>
    settled.push("small")
  );
  await new Promise((resolve) => setTimeout(resolve, 0));
  // Without the bulk mark every frame fits under the high-water mark and none waits.
  assert.ok(!settled.includes(`bulk ${frames - 1}`), "the bulk frames past the mark wait");
  assert.ok(settled.includes("small"), "the small frame does not wait for the bulk output");
  await conn.releaseAll(writer);
  await Promise.all([...bulk, small]);
  assert.equal(settled.length, frames + 1);
});

Deno.test("frame writer reports a failed write once, drops what is queued and releases waiting senders", async () => {
  let errors = 0;
  let writes = 0;
  const conn = {
    write: () => (writes++, Promise.reject(new Error("broken pipe"))),
  };
  const writer = new FrameWriter(conn as unknown as Deno.Conn, 10, () => errors++);
  const waiting = [writer.text("a".repeat(100)), writer.text("b".repeat(100))];
  await Promise.all(waiting);
  await writer.idle();
  await writer.text("after");
  assert.equal(errors, 1);
  assert.equal(writes, 1, "nothing is written after the failure");
});

Deno.test("frame writer writes a frame marked now at once; others wait for the end of the turn", async () => {
  const conn = new HeldConn();
  const writer = new FrameWriter(conn as unknown as Deno.Conn, 1 << 30, () => {});
  void writer.text("batched");
  void writer.text("joins");
  assert.equal(conn.writes.length, 0, "no write before the turn ends");
  await conn.releaseAll(writer);
  assert.equal(conn.writes.length, 1);
  void writer.text("alone", true);
  assert.equal(conn.writes.length, 2, "written within the call");
  // Frames queued while that write is in flight go together after it.
  void writer.text("next", true);
  void writer.text("and next");
  await conn.releaseAll(writer);
  assert.deepEqual(
    conn.writes.map((bytes) => parseFrames(bytes).map(([, payload]) => decode(payload))),
    [["batched", "joins"], ["alone"], ["next", "and next"]],
  );
});

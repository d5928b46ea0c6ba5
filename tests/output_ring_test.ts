import assert from "node:assert/strict";
import {
  OutputRing,
  RETAINED_OUTPUT_BYTES,
  RETAINED_OUTPUT_CHUNKS,
} from "../lib/server/process/output_ring.ts";

/** Pushes `count` chunks of `size` bytes and returns their seqs. */
function fill(ring: OutputRing, count: number, size: number): number[] {
  const seqs: number[] = [];
  for (let i = 0; i < count; i++) seqs.push(ring.push("stdout", new Uint8Array(size)));
  return seqs;
}

const bytesOf = (text: string) => new TextEncoder().encode(text);

function seqsOf(ring: OutputRing, afterSeq = 0, maxBytes?: number): number[] {
  return ring.page(afterSeq, maxBytes).chunks.map((chunk) => chunk.seq);
}

Deno.test("output ring gives output, exit and close events consecutive seqs from 1", () => {
  const ring = new OutputRing();
  assert.equal(ring.push("stdout", bytesOf("a")), 1);
  assert.equal(ring.push("stderr", bytesOf("b")), 2);
  assert.equal(ring.takeSeq(), 3);
  assert.equal(ring.takeSeq(), 4);
  assert.equal(ring.nextSeq, 5);
  assert.deepEqual(ring.page(0, undefined), {
    chunks: [
      { seq: 1, stream: "stdout", chunk: "YQ==" },
      { seq: 2, stream: "stderr", chunk: "Yg==" },
    ],
    nextSeq: 5,
  });
});

Deno.test("output ring keeps exactly RETAINED_OUTPUT_BYTES and evicts the oldest whole chunk beyond", () => {
  const ring = new OutputRing();
  const size = 1024;
  fill(ring, RETAINED_OUTPUT_BYTES / size, size);
  assert.equal(ring.page(0, undefined).chunks.length, RETAINED_OUTPUT_BYTES / size);
  assert.equal(ring.evictedBytesAfter(0), 0);
  ring.push("stdout", bytesOf("x"));
  assert.equal(seqsOf(ring)[0], 2, "the first chunk went");
  assert.equal(ring.evictedBytesAfter(0), size);
  assert.equal(ring.full, false);
});

Deno.test("output ring keeps a single chunk larger than the byte limit", () => {
  const ring = new OutputRing();
  ring.push("stdout", new Uint8Array(RETAINED_OUTPUT_BYTES * 2));
  assert.deepEqual(seqsOf(ring), [1]);
  ring.push("stdout", bytesOf("n"));
  assert.deepEqual(seqsOf(ring), [2]);
});

Deno.test("output ring keeps exactly RETAINED_OUTPUT_CHUNKS chunks and evicts beyond", () => {
  const ring = new OutputRing();
  fill(ring, RETAINED_OUTPUT_CHUNKS, 0);
  assert.equal(ring.page(0, undefined).chunks.length, RETAINED_OUTPUT_CHUNKS);
  fill(ring, 1, 0);
  const seqs = seqsOf(ring);
  assert.equal(seqs.length, RETAINED_OUTPUT_CHUNKS);
  assert.equal(seqs[0], 2);
  assert.equal(seqs.at(-1), RETAINED_OUTPUT_CHUNKS + 1);
});

Deno.test("output ring pages whole chunks within maxBytes, at least one, and resumes after the page", () => {
  const ring = new OutputRing();
  fill(ring, 5, 10); // seqs 1..5
  ring.takeSeq(); // an exit: seq 6
  assert.deepEqual(ring.page(0, 25), {
    chunks: ring.page(0, undefined).chunks.slice(0, 2),
    nextSeq: 3,
  });
  assert.deepEqual(seqsOf(ring, 0, 30), [1, 2, 3], "a page may fill maxBytes exactly");
  assert.deepEqual(seqsOf(ring, 0, 1), [1], "a chunk larger than maxBytes still comes alone");
  assert.deepEqual(seqsOf(ring, 2, 1000), [3, 4, 5]);
  assert.equal(ring.page(2, 1000).nextSeq, 6, "after the last chunk, not after the exit");
  assert.equal(ring.page(2, undefined).nextSeq, 7, "unpaged: the ring's next seq");
  assert.deepEqual(ring.page(5, 1000), { chunks: [], nextSeq: 7 });
});

Deno.test("output ring reports evictedBytes exactly within the history and as a lower bound beyond", () => {
  const ring = new OutputRing({ maxChunks: 2, historyChunks: 3 });
  fill(ring, 7, 10); // seqs 1..7 of 10 bytes; 1..5 evicted, 6 and 7 retained
  assert.deepEqual(seqsOf(ring), [6, 7]);
  // The history remembers the boundaries of seqs 3, 4, 5.
  assert.equal(ring.evictedBytesAfter(3), 20);
  assert.equal(ring.evictedBytesAfter(4), 10);
  assert.equal(ring.evictedBytesAfter(5), 0);
  assert.equal(ring.evictedBytesAfter(6), 0);
  // Seqs 1 and 2 are forgotten: at least 30 bytes were evicted after either.
  assert.equal(ring.evictedBytesAfter(1), 30);
  assert.equal(ring.evictedBytesAfter(0), 30);
});

Deno.test("lossless output ring keeps unread chunks beyond its limits until a read passes them", () => {
  const ring = new OutputRing({ block: true, maxChunks: 2 });
  fill(ring, 4, 1);
  assert.equal(ring.full, true, "the producer must wait");
  assert.deepEqual(seqsOf(ring), [1, 2, 3, 4], "nothing unread was evicted");
  assert.equal(ring.readPast(1), false, "still over the limit");
  assert.deepEqual(seqsOf(ring), [2, 3, 4]);
  assert.equal(ring.readPast(3), true, "room again");
  assert.deepEqual(seqsOf(ring), [3, 4]);
  assert.equal(ring.readPast(2), true, "an older cursor changes nothing");
  assert.equal(ring.evictedBytesAfter(0), 2);
});

Deno.test("lossless output ring drops the oldest once unblocked", () => {
  const ring = new OutputRing({ block: true, maxChunks: 2 });
  fill(ring, 5, 1);
  ring.unblock();
  assert.equal(ring.full, false);
  assert.deepEqual(seqsOf(ring), [4, 5]);
  ring.push("stdout", bytesOf("x"));
  assert.deepEqual(seqsOf(ring), [5, 6]);
});

Deno.test("output ring keeps a small view of a larger buffer as a copy, and a whole buffer as is", () => {
  const ring = new OutputRing();
  const buffer = new Uint8Array(64 * 1024);
  buffer.set(bytesOf("abc"));
  ring.push("stdout", buffer.subarray(0, 3));
  buffer.set(bytesOf("xyz"));
  const whole = bytesOf("def");
  ring.push("stdout", whole);
  whole.set(bytesOf("uvw"));
  assert.deepEqual(ring.page(0, undefined).chunks.map((c) => atob(c.chunk)), ["abc", "uvw"]);
});

Deno.test("output ring frees an evicted chunk's own buffer at once and leaves a shared buffer attached", () => {
  const ring = new OutputRing({ maxChunks: 1 });
  const own = bytesOf("abc");
  const shared = new Uint8Array(64);
  const view = shared.subarray(0, 40); // more than half of its buffer: kept as is, not copied
  ring.push("stdout", own);
  ring.push("stdout", view);
  assert.equal(own.buffer.detached, true, "the evicted chunk's buffer is detached");
  assert.equal(own.length, 0);
  assert.equal(shared.buffer.detached, false, "the retained chunk's buffer is not");
  ring.push("stdout", bytesOf("d"));
  assert.equal(shared.buffer.detached, false, "a view of part of a buffer is never detached");
  assert.deepEqual(ring.page(0, undefined).chunks.map((c) => atob(c.chunk)), ["d"]);
  assert.equal(ring.evictedBytesAfter(0), 43);
});

import assert from "node:assert/strict";
import { BULK_GATE_MS, BULK_GATE_STREAMS, BulkGate } from "../lib/server/process/bulk_gate.ts";

/** A gate on a hand-moved clock whose rests end when the test says. */
function setUp() {
  let now = 0;
  const rests: (() => void)[] = [];
  const gate = new BulkGate({
    now: () => now,
    rest: () => new Promise((resolve) => rests.push(resolve)),
  });
  return { gate, rests, advance: (ms: number) => void (now += ms) };
}

Deno.test("bulk gate never pauses a stream that reads in bulk alone", () => {
  const { gate, advance } = setUp();
  const one = gate.stream();
  for (let i = 0; i < 100; i++) {
    advance(BULK_GATE_MS * 2);
    assert.equal(one.read(true), undefined);
  }
});

Deno.test("bulk gate pauses bulk reads of several streams once its budget is spent, until the rest ends", async () => {
  const { gate, rests, advance } = setUp();
  const streams = Array.from({ length: BULK_GATE_STREAMS }, () => gate.stream());
  for (const s of streams) assert.equal(s.read(true), undefined, "within the budget");
  advance(BULK_GATE_MS + 0.1);
  const rest = streams[0]!.read(true);
  assert.ok(rest instanceof Promise);
  assert.equal(streams[1]!.read(true), rest, "every bulk stream waits for the same rest");
  assert.equal(streams[1]!.read(false), undefined, "a read that did not fill the pipe goes on");
  assert.equal(rests.length, 1);
  rests[0]!();
  await rest;
  assert.equal(streams[0]!.read(true), undefined, "the budget starts again after the rest");
});

Deno.test("bulk gate counts a stream in bulk only while its reads fill the pipe, and not once ended", () => {
  const { gate, advance } = setUp();
  const [a, b] = [gate.stream(), gate.stream()];
  a.read(true);
  b.read(false);
  advance(BULK_GATE_MS * 2);
  assert.equal(a.read(true), undefined, "b trickles: a is alone in bulk");
  b.read(true);
  b.end();
  assert.equal(a.read(true), undefined, "b ended: a is alone again");
});

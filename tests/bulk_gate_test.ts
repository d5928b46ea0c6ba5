import assert from "node:assert/strict";
import { BULK_TURN_MS, BulkGate } from "../lib/server/process/bulk_gate.ts";

/**
 * A gate on a hand-moved clock: its timers and polls end when the test says (`expire` runs the
 * timers due, `polled` ends the polls), and `idle` counts its idle calls.
 */
function setUp() {
  let now = 0;
  let timers: { at: number; fire(): void }[] = [];
  const polls: (() => void)[] = [];
  const counts = { idle: 0 };
  const gate = new BulkGate({
    now: () => now,
    after: (ms) => new Promise((fire) => timers.push({ at: now + ms, fire })),
    poll: () => new Promise((resolve) => polls.push(resolve)),
    idle: () => void counts.idle++,
  });
  /** Lets the microtasks of resolved timers and polls run. */
  const settle = () => new Promise((resolve) => setTimeout(resolve, 0));
  return {
    gate,
    counts,
    polls,
    advance: (ms: number) => void (now += ms),
    async expire() {
      const due = timers.filter((t) => t.at <= now);
      timers = timers.filter((t) => t.at > now);
      for (const t of due) t.fire();
      await settle();
    },
    async polled() {
      for (const resolve of polls.splice(0)) resolve();
      await settle();
    },
  };
}

Deno.test("bulk gate never pauses a stream that reads in bulk alone", async () => {
  const { gate, advance, expire, polls } = setUp();
  const one = gate.stream();
  for (let i = 0; i < 100; i++) {
    advance(BULK_TURN_MS * 2);
    await expire();
    assert.equal(one.read(true), undefined);
  }
  assert.equal(polls.length, 0);
});

Deno.test("bulk gate: a second stream in bulk waits; after the turn's time and one poll it reads, and the first waits", async () => {
  const { gate, advance, expire, polled, polls } = setUp();
  const [a, b] = [gate.stream(), gate.stream()];
  assert.equal(a.read(true), undefined);
  let bResumed = false;
  const bWaits = b.read(true);
  assert.ok(bWaits instanceof Promise);
  void bWaits.then(() => (bResumed = true));
  assert.equal(b.read(true), bWaits, "a read under way when b paused waits for the same turn");
  advance(BULK_TURN_MS - 0.5);
  await expire();
  assert.equal(a.read(true), undefined, "a's turn is not over yet");
  advance(0.5);
  await expire();
  assert.equal(polls.length, 1, "the turn ended: the gate waits for a poll");
  assert.ok(a.read(true) instanceof Promise, "a stops at its next read");
  assert.equal(bResumed, false, "nobody reads in bulk until the runtime has polled");
  await polled();
  assert.equal(bResumed, true);
  assert.equal(b.read(true), undefined, "b holds the turn");
});

Deno.test("bulk gate never pauses a read that did not fill the pipe", async () => {
  const { gate, advance, expire } = setUp();
  const [bulk, trickle] = [gate.stream(), gate.stream()];
  bulk.read(true);
  for (let i = 0; i < 10; i++) {
    advance(BULK_TURN_MS);
    await expire();
    assert.equal(trickle.read(false), undefined);
    assert.equal(bulk.read(true), undefined, "a trickling stream does not take the turn");
  }
});

Deno.test("bulk gate passes the turn at once when its holder's pipe is drained or its stream ends", async () => {
  const { gate, polled, polls } = setUp();
  const [a, b, c] = [gate.stream(), gate.stream(), gate.stream()];
  a.read(true);
  const bWaits = b.read(true)!;
  const cWaits = c.read(true)!;
  a.read(false);
  assert.equal(
    polls.length,
    1,
    "a's read found the pipe drained: the turn passes without its time",
  );
  await polled();
  await bWaits;
  b.end();
  await polled();
  await cWaits;
  assert.equal(c.read(true), undefined, "c holds the turn");
});

Deno.test("bulk gate takes the turn from a holder that stops reading once its time is up", async () => {
  const { gate, advance, expire, polled } = setUp();
  const [a, b] = [gate.stream(), gate.stream()];
  a.read(true); // a then pauses for its own reasons (its connection is congested) and reads no more
  const bWaits = b.read(true)!;
  advance(BULK_TURN_MS);
  await expire();
  await polled();
  await bWaits;
  assert.equal(b.read(true), undefined);
});

Deno.test("bulk gate lets go of what its polls hold once nothing reads in bulk or waits", async () => {
  const { gate, counts, polled } = setUp();
  const [a, b] = [gate.stream(), gate.stream()];
  a.read(true);
  const bWaits = b.read(true)!;
  a.end();
  await polled();
  await bWaits;
  assert.equal(counts.idle, 0, "b holds the turn");
  b.end();
  assert.equal(counts.idle, 1);
});

Deno.test("bulk gate resumes a waiting stream that ends (it does not stay paused)", async () => {
  const { gate } = setUp();
  const [a, b] = [gate.stream(), gate.stream()];
  a.read(true);
  const bWaits = b.read(true)!;
  b.end();
  await bWaits;
  assert.equal(a.read(true), undefined, "a still holds the turn");
});

import assert from "node:assert/strict";
import {
  type DeadlineClock,
  HandshakeDeadlines,
} from "../lib/server/listen/handshake_deadlines.ts";

/** A clock the test moves: `run()` fires the earliest timer at its time. */
function fakeClock() {
  let now = 0;
  const timers: { at: number; fire: () => void }[] = [];
  const clock: DeadlineClock = {
    now: () => now,
    after: (ms, fire) => void timers.push({ at: now + ms, fire }),
  };
  return {
    clock,
    set: (ms: number) => void (now = ms),
    timers: () => timers.length,
    run() {
      timers.sort((a, b) => a.at - b.at);
      const next = timers.shift()!;
      now = next.at;
      next.fire();
      return now;
    },
  };
}

Deno.test("each stalled handshake runs out after its own full timeout, however the handshakes are staggered", () => {
  const time = fakeClock();
  const expired: [string, number][] = [];
  const handshakes = new HandshakeDeadlines<string>(
    300,
    (name) => expired.push([name, time.clock.now()]),
    time.clock,
  );
  for (const [name, at] of [["a", 0], ["b", 100], ["c", 200]] as const) {
    time.set(at);
    handshakes.add(name);
  }
  assert.equal(time.timers(), 1, "one timer serves them all");
  while (time.timers() > 0) time.run();
  assert.deepEqual(expired, [["a", 300], ["b", 400], ["c", 500]]);
  assert.equal(handshakes.size, 0);
  // One more after all the others ran out: the timer is set again for it.
  time.set(1000);
  handshakes.add("late");
  assert.equal(time.timers(), 1);
  time.run();
  assert.deepEqual(expired.at(-1), ["late", 1300]);
});

Deno.test("a completed or evicted handshake does not run out; the next one keeps its own time", () => {
  const time = fakeClock();
  const expired: string[] = [];
  const handshakes = new HandshakeDeadlines<string>(300, (name) => expired.push(name), time.clock);
  handshakes.add("done");
  time.set(50);
  handshakes.add("evicted");
  time.set(100);
  handshakes.add("slow");
  assert.ok(handshakes.delete("done"));
  assert.equal(handshakes.takeOldest(), "evicted");
  assert.equal(time.run(), 300);
  assert.deepEqual(expired, [], "the first timer finds nothing run out");
  assert.equal(time.run(), 400);
  assert.deepEqual(expired, ["slow"]);
  assert.equal(handshakes.delete("slow"), false);
  assert.deepEqual(handshakes.takeAll(), []);
});

import assert from "node:assert/strict";
import {
  OutputCoalescer,
  PACE_GAP_MS,
  PACE_SMALL_BYTES,
  PACE_STREAK,
  type Pacing,
} from "../lib/server/process/output_coalescer.ts";

/** A coalescer whose source records pause/resume, and whose deliveries return `next()`. */
function setUp(next: () => Promise<void> | void) {
  const events: string[] = [];
  const merge = new OutputCoalescer((bytes) => {
    events.push(`deliver ${bytes.length}`);
    return next();
  }, { pause: () => events.push("pause"), resume: () => events.push("resume") });
  return { events, merge };
}

const microtasks = () => new Promise((resolve) => setTimeout(resolve, 0));

Deno.test("output coalescer does not pause its source for deliveries that resolve before the next read", async () => {
  const { events, merge } = setUp(() => Promise.resolve());
  for (const size of [1, 2, 3]) {
    merge.push(new Uint8Array(size));
    await microtasks();
  }
  await merge.end();
  assert.deepEqual(events, ["deliver 1", "deliver 2", "deliver 3"]);
});

Deno.test("output coalescer pauses from the first read that arrives while a delivery is pending, then merges", async () => {
  const gate = Promise.withResolvers<void>();
  let calls = 0;
  const { events, merge } = setUp(() => (calls++ === 0 ? gate.promise : undefined));
  merge.push(new Uint8Array(10));
  merge.push(new Uint8Array(20));
  merge.push(new Uint8Array(30));
  assert.deepEqual(events, ["deliver 10", "pause"], "paused once, at the first staged read");
  assert.equal(merge.congested, true);
  gate.resolve();
  await merge.end();
  assert.equal(merge.congested, false);
  assert.deepEqual(events, ["deliver 10", "pause", "deliver 50", "resume"]);
});

Deno.test("output coalescer keeps a pull-style reader waiting while a delivery is pending", async () => {
  const gate = Promise.withResolvers<void>();
  const { merge } = setUp(() => gate.promise);
  const wait = merge.push(new Uint8Array(1));
  assert.ok(wait instanceof Promise, "the reader must wait");
  let done = false;
  wait.then(() => (done = true));
  await microtasks();
  assert.equal(done, false);
  gate.resolve();
  await wait;
  assert.equal(merge.push(new Uint8Array(0)), undefined, "free again");
});

/** Pacing on a clock the test sets; rests resolve when the test says. */
function fakePacing() {
  const clock = { now: 0 };
  const rests: PromiseWithResolvers<void>[] = [];
  const pacing: Pacing = {
    now: () => clock.now,
    rest: () => {
      const rest = Promise.withResolvers<void>();
      rests.push(rest);
      return rest.promise;
    },
  };
  return { clock, rests, pacing };
}

function pacedSetUp() {
  const { clock, rests, pacing } = fakePacing();
  const events: string[] = [];
  const merge = new OutputCoalescer((bytes) => void events.push(`deliver ${bytes.length}`), {
    pause: () => events.push("pause"),
    resume: () => events.push("resume"),
  }, pacing);
  return { clock, rests, events, merge };
}

Deno.test("paced output coalescer rests its source after PACE_STREAK small reads, each right after the previous delivery", async () => {
  const { clock, rests, events, merge } = pacedSetUp();
  const small = PACE_SMALL_BYTES - 1;
  merge.push(new Uint8Array(small)); // the first read has no previous delivery
  for (let i = 0; i < PACE_STREAK; i++) {
    clock.now += PACE_GAP_MS / 2;
    merge.push(new Uint8Array(small));
  }
  assert.equal(rests.length, 1, "one rest");
  assert.equal(events.at(-1), "pause", "paused at once, from the read that completed the streak");
  assert.equal(merge.congested, false, "a rest is not congestion");
  merge.push(new Uint8Array(10));
  merge.push(new Uint8Array(20));
  rests[0]!.resolve();
  await merge.end();
  assert.deepEqual(
    events.slice(-2),
    ["deliver 30", "resume"],
    "what came during the rest is merged",
  );
});

Deno.test("paced output coalescer never rests for large reads or for reads that come after a pause of the writer", () => {
  const { clock, rests, merge } = pacedSetUp();
  for (let i = 0; i < 4 * PACE_STREAK; i++) {
    clock.now += PACE_GAP_MS / 2;
    merge.push(new Uint8Array(PACE_SMALL_BYTES));
  }
  for (let i = 0; i < 4 * PACE_STREAK; i++) {
    clock.now += PACE_GAP_MS;
    merge.push(new Uint8Array(1));
  }
  assert.equal(rests.length, 0);
});

Deno.test("output coalescer without pacing never rests", () => {
  const { events, merge } = setUp(() => undefined);
  for (let i = 0; i < 4 * PACE_STREAK; i++) merge.push(new Uint8Array(1));
  assert.ok(!events.includes("pause"));
});

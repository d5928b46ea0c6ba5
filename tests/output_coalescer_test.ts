import assert from "node:assert/strict";
import { OutputCoalescer } from "../lib/server/process/output_coalescer.ts";

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
  gate.resolve();
  await merge.end();
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

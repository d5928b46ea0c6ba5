import assert from "node:assert/strict";
import { type StdinSink, StdinWriter } from "../lib/server/process/stdin_writer.ts";

/**
 * A sink that records what reaches it. `take` says how many bytes a `tryWrite` takes (all by
 * default); `hold` makes the next waiting write wait until released; `refuseNext` makes the next
 * `tryWrite` throw.
 */
function recordingSink() {
  const events: string[] = [];
  const kept: Uint8Array[] = [];
  let held: PromiseWithResolvers<void> | undefined;
  let refuse = false;
  const control = {
    events,
    kept,
    take: (bytes: Uint8Array) => bytes.length,
    hold: () => (held = Promise.withResolvers<void>()),
    release: () => {
      held?.resolve();
      held = undefined;
    },
    refuseNext: () => (refuse = true),
  };
  const sink: StdinSink = {
    tryWrite(bytes) {
      events.push(`try ${[...bytes].join(",")}`);
      if (refuse) {
        refuse = false;
        throw new Error("refused");
      }
      return control.take(bytes);
    },
    write(bytes) {
      events.push(`wait ${[...bytes].join(",")}`);
      kept.push(bytes);
      return held?.promise ?? Promise.resolve();
    },
    end() {
      events.push("end");
      return Promise.resolve();
    },
  };
  return { sink, ...control, control };
}

const bytes = (...values: number[]) => new Uint8Array(values);
const nextTurn = () => new Promise((resolve) => setTimeout(resolve, 0));

Deno.test("stdin writes queued in one turn reach the pipe in one write, in order", async () => {
  const { sink, events } = recordingSink();
  const writer = new StdinWriter(sink);
  const written = [writer.write(bytes(1)), writer.write(bytes(2, 3)), writer.write(bytes(4))];
  assert.deepEqual(events, [], "nothing is written before the turn ends");
  await Promise.all(written);
  assert.deepEqual(events, ["try 1,2,3,4"]);
});

Deno.test("stdin bytes the pipe does not take at once wait for room; chunks queued meanwhile leave together after them", async () => {
  const { sink, events, control } = recordingSink();
  const writer = new StdinWriter(sink);
  control.take = () => 1;
  control.hold();
  const first = writer.write(bytes(1, 2, 3));
  await nextTurn();
  assert.deepEqual(events, ["try 1,2,3", "wait 2,3"]);
  let secondDone = false;
  const second = writer.write(bytes(4)).then(() => (secondDone = true));
  const third = writer.write(bytes(5));
  await nextTurn();
  assert.deepEqual(events, ["try 1,2,3", "wait 2,3"], "the next batch waits for the first");
  assert.equal(secondDone, false);
  control.take = (chunk) => chunk.length;
  control.release();
  await Promise.all([first, second, third]);
  assert.deepEqual(events, ["try 1,2,3", "wait 2,3", "try 4,5"]);
});

Deno.test("stdin bytes left waiting are a copy: another writer's batch does not change them", async () => {
  const a = recordingSink();
  const b = recordingSink();
  const writerA = new StdinWriter(a.sink);
  const writerB = new StdinWriter(b.sink);
  a.control.take = () => 1;
  a.hold();
  const waiting = [writerA.write(bytes(1)), writerA.write(bytes(2, 3))];
  await nextTurn();
  await Promise.all([writerB.write(bytes(7)), writerB.write(bytes(8, 9))]);
  assert.deepEqual(b.events, ["try 7,8,9"]);
  assert.deepEqual([...a.kept[0]!], [2, 3]);
  a.release();
  await Promise.all(waiting);
});

Deno.test("stdin bytes of a batch too large for the shared buffer wait without a second copy", async () => {
  const { sink, kept, control } = recordingSink();
  control.take = () => 1000;
  control.hold();
  const writer = new StdinWriter(sink);
  sink.write = (rest) => (kept.push(rest), Promise.resolve());
  const half = 200 * 1024;
  await Promise.all([writer.write(new Uint8Array(half)), writer.write(new Uint8Array(half))]);
  assert.equal(kept[0]!.length, 2 * half - 1000);
  assert.equal(kept[0]!.byteOffset, 1000, "the waiting bytes are a view of their own batch");
});

Deno.test("a stdin write the pipe refuses rejects its batch only; later writes still go", async () => {
  const { sink, events, refuseNext } = recordingSink();
  const writer = new StdinWriter(sink);
  refuseNext();
  const refused = [writer.write(bytes(1)), writer.write(bytes(2))];
  for (const write of refused) await assert.rejects(write, /refused/);
  await writer.write(bytes(3));
  assert.deepEqual(events, ["try 1,2", "try 3"]);
});

Deno.test("closing stdin ends the pipe after the writes queued before it and refuses later ones", async () => {
  const { sink, events } = recordingSink();
  const writer = new StdinWriter(sink);
  const written = writer.write(bytes(1));
  const closed = writer.close();
  await assert.rejects(writer.write(bytes(2)), /closed/);
  await Promise.all([written, closed]);
  assert.deepEqual(events, ["try 1", "end"]);
  assert.equal(await writer.close(), undefined, "a second close is the first one");
  assert.deepEqual(events, ["try 1", "end"]);
});

Deno.test("closing an idle stdin ends the pipe at once", async () => {
  const { sink, events } = recordingSink();
  await new StdinWriter(sink).close();
  assert.deepEqual(events, ["end"]);
});

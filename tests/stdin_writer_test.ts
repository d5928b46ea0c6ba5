import assert from "node:assert/strict";
import { type StdinSink, StdinWriter } from "../lib/server/process/stdin_writer.ts";

/** A sink that records what reaches it; `hold` makes the next write wait until released. */
function recordingSink() {
  const events: string[] = [];
  let held: PromiseWithResolvers<void> | undefined;
  let refuse = false;
  const sink: StdinSink = {
    write(bytes) {
      events.push(`write ${[...bytes].join(",")}`);
      if (refuse) {
        refuse = false;
        return Promise.reject(new Error("refused"));
      }
      return held?.promise ?? Promise.resolve();
    },
    end() {
      events.push("end");
      return Promise.resolve();
    },
  };
  return {
    sink,
    events,
    hold: () => (held = Promise.withResolvers<void>()),
    release: () => {
      held?.resolve();
      held = undefined;
    },
    refuseNext: () => (refuse = true),
  };
}

const bytes = (...values: number[]) => new Uint8Array(values);

Deno.test("stdin writes queued in one turn reach the pipe in one write, in order", async () => {
  const { sink, events } = recordingSink();
  const writer = new StdinWriter(sink);
  const written = [writer.write(bytes(1)), writer.write(bytes(2, 3)), writer.write(bytes(4))];
  assert.deepEqual(events, [], "nothing is written before the turn ends");
  await Promise.all(written);
  assert.deepEqual(events, ["write 1,2,3,4"]);
});

Deno.test("stdin chunks queued while a write waits for room leave together after it", async () => {
  const { sink, events, hold, release } = recordingSink();
  const writer = new StdinWriter(sink);
  hold();
  const first = writer.write(bytes(1));
  await new Promise((resolve) => setTimeout(resolve, 0));
  assert.deepEqual(events, ["write 1"]);
  let secondDone = false;
  const second = writer.write(bytes(2)).then(() => (secondDone = true));
  const third = writer.write(bytes(3));
  await new Promise((resolve) => setTimeout(resolve, 0));
  assert.deepEqual(events, ["write 1"], "the next write waits for the pipe to take the first");
  assert.deepEqual(secondDone, false);
  release();
  await Promise.all([first, second, third]);
  assert.deepEqual(events, ["write 1", "write 2,3"]);
});

Deno.test("a stdin write the pipe refuses rejects its batch only; later writes still go", async () => {
  const { sink, events, refuseNext } = recordingSink();
  const writer = new StdinWriter(sink);
  refuseNext();
  const refused = [writer.write(bytes(1)), writer.write(bytes(2))];
  for (const write of refused) await assert.rejects(write, /refused/);
  await writer.write(bytes(3));
  assert.deepEqual(events, ["write 1,2", "write 3"]);
});

Deno.test("closing stdin ends the pipe after the writes queued before it and refuses later ones", async () => {
  const { sink, events } = recordingSink();
  const writer = new StdinWriter(sink);
  const written = writer.write(bytes(1));
  const closed = writer.close();
  await assert.rejects(writer.write(bytes(2)), /closed/);
  await Promise.all([written, closed]);
  assert.deepEqual(events, ["write 1", "end"]);
  assert.deepEqual(await writer.close(), undefined, "a second close is the first one");
  assert.deepEqual(events, ["write 1", "end"]);
});

Deno.test("closing an idle stdin ends the pipe at once", async () => {
  const { sink, events } = recordingSink();
  await new StdinWriter(sink).close();
  assert.deepEqual(events, ["end"]);
});

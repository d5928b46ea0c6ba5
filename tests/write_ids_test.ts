import assert from "node:assert/strict";
import { ManagedProcess, REMEMBERED_WRITE_IDS } from "../lib/server/process/managed_process.ts";

function process(): ManagedProcess {
  return new ManagedProcess("p", 2, {
    sink: () => undefined,
    extensions: () => new Set(),
    block: false,
    onClosed: () => {},
  });
}

Deno.test("a process remembers its last REMEMBERED_WRITE_IDS writeIds and forgets the oldest first", () => {
  const proc = process();
  for (let i = 0; i < REMEMBERED_WRITE_IDS; i++) assert.equal(proc.rememberWrite(`w${i}`), true);
  assert.equal(proc.rememberWrite("w0"), false, "a remembered id is a repeat");
  assert.equal(proc.knowsWrite("w0"), true);
  // Each new id past the bound forgets the oldest one, in the order they came.
  for (let round = 0; round < 3; round++) {
    for (let i = 0; i < REMEMBERED_WRITE_IDS; i++) {
      const id = `r${round}-${i}`;
      assert.equal(proc.rememberWrite(id), true);
      const forgotten = i === 0 ? (round === 0 ? `w0` : `r${round - 1}-0`) : undefined;
      if (forgotten !== undefined) assert.equal(proc.knowsWrite(forgotten), false);
    }
  }
  const last = `r2-${REMEMBERED_WRITE_IDS - 1}`;
  assert.equal(proc.knowsWrite(last), true);
  assert.equal(proc.knowsWrite("r2-0"), true, "the oldest of the last round is still remembered");
  assert.equal(proc.knowsWrite(`r1-${REMEMBERED_WRITE_IDS - 1}`), false);
  assert.equal(proc.rememberWrite("w1"), true, "a forgotten id counts as new");
});

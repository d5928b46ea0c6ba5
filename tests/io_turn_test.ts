import assert from "node:assert/strict";
import * as net from "node:net";
import { IoTurn } from "../lib/server/process/io_turn.ts";

const openFds = () => [...Deno.readDirSync("/proc/self/fd")].length;

Deno.test("an I/O turn resolves every caller waiting for it, turn after turn", async () => {
  const turn = new IoTurn(net);
  try {
    for (let round = 0; round < 50; round++) {
      await Promise.all([turn.next(), turn.next(), turn.next()]);
    }
  } finally {
    turn.close();
  }
});

Deno.test("an I/O turn's pipe is opened on use and closed by close(), which resolves who waits", async () => {
  const turn = new IoTurn(net);
  const before = openFds();
  await turn.next();
  assert.equal(openFds(), before + 2, "the pipe's two ends");
  const waiting = turn.next();
  turn.close();
  await waiting;
  assert.equal(openFds(), before, "both ends closed at once");
  await turn.next();
  turn.close();
  assert.equal(openFds(), before, "a second use opened and closed a pipe again");
});

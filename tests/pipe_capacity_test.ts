import assert from "node:assert/strict";
import { eventually, pidsMatching } from "./helpers/server_harness.ts";
import { inProcessSession } from "./helpers/in_process_server.ts";
import { call, sh, startProcess as start } from "./helpers/rpc.ts";
import { BULK_PIPE_BYTES, MAX_BULK_PIPES } from "../lib/server/process/pipe.ts";
import { C, cString } from "../lib/server/host/libc.ts";

const libc = Deno.dlopen("libc.so.6", {
  open: { parameters: ["buffer", "i32"], result: "i32" },
  fcntl: { parameters: ["i32", "i32", "i32"], result: "i32" },
  close: { parameters: ["i32"], result: "i32" },
});

/** The capacity of the pipe that is `pid`'s stdout (opened again through /proc). */
function stdoutPipeBytes(pid: number): number {
  const fd = libc.symbols.open(cString(`/proc/${pid}/fd/1`), C.O_RDONLY | C.O_NONBLOCK);
  assert.ok(fd >= 0, `open /proc/${pid}/fd/1`);
  try {
    return libc.symbols.fcntl(fd, C.F_GETPIPE_SZ, 0);
  } finally {
    libc.symbols.close(fd);
  }
}

Deno.test("process output: a stdout pipe grows to 1 MiB at its first full read, at most 16 at once; one that trickles keeps 64 KiB", async () => {
  await using server = await inProcessSession();
  const client = server.stdio;
  const marker = `pipe-capacity-${Math.floor(Math.random() * 1e9)}`;
  const bulk = Array.from({ length: MAX_BULK_PIPES + 1 }, (_, i) => `bulk-${i}`);
  // One 1 MiB write: the pipe fills, so the server's first read is a full one.
  const writer = (id: string) =>
    sh(`dd if=/dev/zero bs=1048576 count=1 2>/dev/null; sleep 30; : ${marker} ${id}`);
  try {
    for (const id of bulk) await start(client, id, writer(id));
    await start(client, "trickle", sh(`echo one line; sleep 30; : ${marker} trickle`));
    const received = (id: string) => client.log.output(id).length;
    assert.ok(
      await eventually(() => bulk.every((id) => received(id) === 1024 * 1024), 30_000),
      "every bulk process's output arrived",
    );
    assert.ok(await eventually(() => received("trickle") > 0), "the line arrived");
    const sizeOf = (id: string) => {
      const [pid] = pidsMatching(`: ${marker} ${id}`);
      assert.ok(pid !== undefined, `the shell of ${id}`);
      return stdoutPipeBytes(pid);
    };
    const sizes = bulk.map(sizeOf);
    assert.equal(sizes.filter((s) => s === BULK_PIPE_BYTES).length, MAX_BULK_PIPES, `${sizes}`);
    assert.equal(sizes.filter((s) => s === 64 * 1024).length, 1, `${sizes}`);
    assert.equal(sizeOf("trickle"), 64 * 1024);
  } finally {
    for (const id of [...bulk, "trickle"]) {
      await call(client, "process/terminate", { processId: id }).catch(() => {});
    }
    for (const id of [...bulk, "trickle"]) await client.log.processClosed(id).catch(() => {});
  }
});

Deno.test("process output: a grown pipe is given back when its stream ends, so a later bulk stream grows", async () => {
  await using server = await inProcessSession();
  const client = server.stdio;
  const marker = `pipe-release-${Math.floor(Math.random() * 1e9)}`;
  const ids = Array.from({ length: MAX_BULK_PIPES }, (_, i) => `done-${i}`);
  for (const id of ids) await start(client, id, ["dd", "if=/dev/zero", "bs=1048576", "count=1"]);
  for (const id of ids) await client.log.processClosed(id, 30_000);
  await start(
    client,
    "later",
    sh(`dd if=/dev/zero bs=1048576 count=1 2>/dev/null; sleep 30; : ${marker}`),
  );
  try {
    assert.ok(
      await eventually(() => client.log.output("later").length === 1024 * 1024, 30_000),
      "the later process's output arrived",
    );
    const [pid] = pidsMatching(`: ${marker}`);
    assert.ok(pid !== undefined, "the later shell");
    assert.equal(stdoutPipeBytes(pid), BULK_PIPE_BYTES);
  } finally {
    await call(client, "process/terminate", { processId: "later" }).catch(() => {});
    await client.log.processClosed("later").catch(() => {});
  }
});

import assert from "node:assert/strict";
import { type ChildExit, watchChildExit } from "../lib/server/host/child_exits.ts";
import { C } from "../lib/server/host/libc.ts";
import { posixSpawn } from "../lib/server/host/posix_spawn.ts";

const O_WRONLY = 0o1;

function exitOf(pid: number): Promise<ChildExit> {
  const { promise, resolve } = Promise.withResolvers<ChildExit>();
  watchChildExit(pid, resolve);
  return promise;
}

/** Runs `script` under /bin/sh with stdout into a temporary file; returns what it wrote. */
async function shellOutput(script: string): Promise<{ exit: ChildExit; output: string }> {
  const file = await Deno.makeTempFile();
  try {
    const outcome = posixSpawn("/bin/sh", ["sh", "-c", script], ["PATH=/usr/bin:/bin"], "/", [
      { fd: 0, open: "/dev/null", flags: C.O_RDONLY },
      { fd: 1, open: file, flags: O_WRONLY },
      { fd: 2, dup: 1 },
    ]);
    assert.ok(outcome.pid !== undefined, `spawn failed with errno ${outcome.errno}`);
    const exit = await exitOf(outcome.pid);
    return { exit, output: await Deno.readTextFile(file) };
  } finally {
    await Deno.remove(file);
  }
}

Deno.test("posixSpawn starts the child as the leader of a new session and process group", async () => {
  const { exit, output } = await shellOutput("cat /proc/$$/stat; echo; echo $$");
  assert.deepEqual(exit, { code: 0, signal: null });
  const [stat, pid] = output.split("\n").filter((line) => line !== "");
  const fields = stat!.slice(stat!.lastIndexOf(")") + 2).split(" ");
  assert.deepEqual([fields[2], fields[3]], [pid, pid]);
});

Deno.test("posixSpawn gives the child no descriptor beyond 0, 1 and 2, and every standard signal at its default disposition", async () => {
  // `ls` lists its own descriptors, among them the one of the directory it reads.
  const { output } = await shellOutput("ls /proc/self/fd; grep SigIgn /proc/self/status");
  const [fds, ignored] = output.split("SigIgn:");
  assert.deepEqual(fds!.trim().split("\n"), ["0", "1", "2", "3"]);
  // Signals 1–31; glibc keeps its own 32 and 33 as they are (as for Deno's own spawns).
  assert.equal(BigInt(`0x${ignored!.trim()}`) & 0x7fffffffn, 0n);
});

Deno.test("posixSpawn reports a missing program as its errno and starts nothing", () => {
  const outcome = posixSpawn("/nonexistent/program", ["program"], [], "/", []);
  assert.deepEqual(outcome, { errno: C.ENOENT });
});

Deno.test("watchChildExit reports the exit code, and the signal that ended a child", async () => {
  const exited = posixSpawn("/bin/sh", ["sh", "-c", "exit 7"], [], "/", []);
  assert.deepEqual(await exitOf(exited.pid!), { code: 7, signal: null });
  const sleeping = posixSpawn("/bin/sleep", ["sleep", "30"], [], "/", []);
  const exit = exitOf(sleeping.pid!);
  Deno.kill(sleeping.pid!, "SIGKILL");
  assert.deepEqual(await exit, { code: null, signal: 9 });
});

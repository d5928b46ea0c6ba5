/**
 * The watchdog's program on its own (`lib/server/host/watchdog.ts`): what
 * it ends when its input ends without `bye`, and what it never touches.
 *
 * Every process started here is killed by pid at the end of each test.
 *
 * @module
 */

import assert from "node:assert/strict";
import { queueLine, WATCHDOG_SCRIPT } from "../lib/server/host/watchdog.ts";
import { isMarkOf, markInstance, spawnMarked } from "../lib/server/host/spawn_mark.ts";
import { processLimit } from "../lib/server/host/libc.ts";
import { eventually } from "./helpers/server_harness.ts";
import { descendants, procStat } from "./helpers/reliability_proc.ts";

/** A `sh` that runs a `sleep` in the background and waits: a tree of two. */
function startTree(): Deno.ChildProcess {
  return new Deno.Command("/bin/sh", {
    args: ["-c", "sleep 300 & wait"],
    stdin: "null",
    stdout: "null",
  }).spawn();
}

function alive(pid: number): boolean {
  const state = procStat(pid)?.state;
  return state !== undefined && state !== "Z" && state !== "X";
}

/**
 * Runs the watchdog program (looking for the marks of `instance`, if given), writes `input` to
 * it and closes its stdin; resolves when it exited.
 */
async function runWatchdog(input: string, instance?: bigint): Promise<Deno.CommandStatus> {
  const watchdog = new Deno.Command("/bin/sh", {
    args: ["-c", WATCHDOG_SCRIPT, "watchdog", `${instance ?? ""}`],
    stdin: "piped",
    stdout: "null",
    stderr: "null",
  }).spawn();
  const writer = watchdog.stdin.getWriter();
  await writer.write(new TextEncoder().encode(input));
  await writer.close();
  return await watchdog.status;
}

type Trees = [Deno.ChildProcess, Deno.ChildProcess, Deno.ChildProcess];

/** Runs `fn` with three fresh trees, then kills whatever is left of them. */
async function withTrees(fn: (trees: Trees) => Promise<void>): Promise<void> {
  const trees: Trees = [startTree(), startTree(), startTree()];
  try {
    assert.ok(await eventually(() => trees.every((t) => descendants(t.pid).length === 1)));
    await fn(trees);
  } finally {
    for (const tree of trees) {
      for (const p of descendants(tree.pid)) {
        try {
          Deno.kill(p.pid, "SIGKILL");
        } catch {
          // Already gone.
        }
      }
      try {
        tree.kill("SIGKILL");
      } catch {
        // Already gone.
      }
      await tree.status;
    }
  }
}

Deno.test("the watchdog ends a recorded tree when its input ends without bye, and only that", async () => {
  await withTrees(async ([told, wrongStart, untold]) => {
    const start = procStat(told.pid)!.start;
    const kids = descendants(told.pid).map((p) => p.pid);
    const status = await runWatchdog(
      `${told.pid} ${start}\n${wrongStart.pid} ${procStat(wrongStart.pid)!.start + 1}\n`,
    );
    assert.equal(status.code, 0);
    assert.equal((await told.status).signal, "SIGKILL", "the recorded leader lives on");
    assert.ok(await eventually(() => kids.every((pid) => !alive(pid))), "its child lives on");
    assert.ok(alive(wrongStart.pid), "a process whose starttime differs was killed");
    assert.equal(descendants(wrongStart.pid).length, 1);
    assert.ok(alive(untold.pid), "a process it was not told about was killed");
    assert.equal(descendants(untold.pid).length, 1);
  });
});

Deno.test("the watchdog signals nothing after bye", async () => {
  await withTrees(async ([tree]) => {
    const status = await runWatchdog(`${tree.pid} ${procStat(tree.pid)!.start}\nbye\n`);
    assert.equal(status.code, 0);
    assert.ok(alive(tree.pid), "the tree was killed after bye");
    assert.equal(descendants(tree.pid).length, 1);
  });
});

Deno.test("the watchdog ignores malformed lines", async () => {
  await withTrees(async ([tree]) => {
    const status = await runWatchdog(`${tree.pid}\n-${tree.pid} 1\n${tree.pid}:1 x\n*\n`);
    assert.equal(status.code, 0);
    assert.ok(alive(tree.pid), "a malformed line killed a process");
  });
});

/**
 * Spawns `sh -c script` with its soft `RLIMIT_RTTIME` set to `limit` (this process's own limit
 * lowered around the spawn, as the server does).
 */
function spawnWithLimit(limit: bigint, script: string): Deno.ChildProcess {
  const own = new BigUint64Array(2);
  assert.equal(processLimit(15, null, own), 0);
  assert.equal(processLimit(15, new BigUint64Array([limit, own[1]!]), null), 0);
  try {
    return new Deno.Command("/bin/sh", { args: ["-c", script], stdin: "null", stdout: "null" })
      .spawn();
  } finally {
    processLimit(15, own, null);
  }
}

/** Processes whose command line carries `needle`. */
function carrying(needle: string): number[] {
  const out: number[] = [];
  for (const entry of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(entry.name) || !alive(Number(entry.name))) continue;
    try {
      if (Deno.readTextFileSync(`/proc/${entry.name}/cmdline`).includes(needle)) {
        out.push(Number(entry.name));
      }
    } catch {
      // Gone.
    }
  }
  return out;
}

const MARKS_SKIP = markInstance() === undefined
  ? " (skipped: this process cannot set marks: no FFI, or its soft RLIMIT_RTTIME is not unlimited)"
  : "";

Deno.test({
  name:
    `the watchdog ends every process carrying its server's mark, re-parented or not, and none carrying another server's mark or none${MARKS_SKIP}`,
  ignore: MARKS_SKIP !== "",
  async fn() {
    const instance = markInstance()!;
    // Sleeps of `31<n>.<tag>` and `32<n>.<tag>` seconds: tree n.
    const tag = `${Deno.pid % 1000}${Date.now() % 1000}`;
    // A double fork: its `setsid` sleep is re-parented (to init, or a subreaper above) at once.
    const script = (n: number) => `(setsid sleep 31${n}.${tag} &) ; exec sleep 32${n}.${tag}`;
    const trees: Deno.ChildProcess[] = [];
    try {
      const own = spawnMarked(() =>
        new Deno.Command("/bin/sh", { args: ["-c", script(1)], stdin: "null", stdout: "null" })
          .spawn()
      );
      assert.ok(own.mark !== undefined && isMarkOf(own.mark, instance));
      trees.push(own.value);
      const otherMark = (1n << 62n) - ((instance % (1n << 28n)) + 1n << 32n) - 1n;
      assert.ok(!isMarkOf(otherMark, instance));
      trees.push(spawnWithLimit(otherMark, script(2)));
      trees.push(new Deno.Command("/bin/sh", { args: ["-c", script(3)], stdout: "null" }).spawn());
      assert.ok(
        await eventually(() => [1, 2, 3].every((n) => carrying(`${n}.${tag}`).length === 2)),
      );
      const status = await runWatchdog("", instance);
      assert.equal(status.code, 0);
      assert.ok(
        await eventually(() => carrying(`1.${tag}`).length === 0),
        "a marked process lives on",
      );
      assert.equal(carrying(`2.${tag}`).length, 2, "another server's marked process was killed");
      assert.equal(carrying(`3.${tag}`).length, 2, "an unmarked process was killed");
    } finally {
      for (const pid of carrying(tag)) {
        try {
          Deno.kill(pid, "SIGKILL");
        } catch {
          // Already gone.
        }
      }
      for (const tree of trees) {
        try {
          tree.kill("SIGKILL");
        } catch {
          // Already gone.
        }
        await tree.status;
      }
    }
  },
});

/** A pipe to a watchdog that does not read: it takes nothing; counts the writes offered. */
function fullPipe(): { write: () => number; writes: number } {
  const pipe = {
    writes: 0,
    write: () => {
      pipe.writes++;
      return 0;
    },
  };
  return pipe;
}

Deno.test("lines for a watchdog that does not read are queued up to exactly 1 MiB", () => {
  const pipe = fullPipe();
  const line = "4194304 123456789\n";
  const before = "1".repeat(1_048_576 - line.length);
  const queued = queueLine(before, line, pipe.write);
  assert.equal(queued, before + line);
  assert.equal((queued as string).length, 1_048_576);
  assert.equal(pipe.writes, 1, "the queue is offered to the pipe");
});

Deno.test("a line that would take the queue for a watchdog that does not read past 1 MiB is dropped", () => {
  const pipe = fullPipe();
  const line = "4194304 123456789\n";
  const before = "1".repeat(1_048_576 - line.length + 1);
  assert.equal(queueLine(before, line, pipe.write), before);
  const atBound = "1".repeat(1_048_576);
  assert.equal(queueLine(atBound, "\n", pipe.write), atBound);
  assert.equal(pipe.writes, 0, "nothing more is offered to the pipe");
});

Deno.test("the queue for the watchdog keeps what the pipe did not take, and reports a broken pipe", () => {
  assert.equal(queueLine("12 34\n", "56 78\n", (bytes) => bytes.length - 3), "78\n");
  assert.equal(queueLine("", "56 78\n", () => "broken"), "broken");
});

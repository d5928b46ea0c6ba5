/**
 * Survivors: descendants that leave the process group or session of the
 * process the server started (`setsid`, a double fork, `nohup`, a child
 * that ignores SIGTERM) must still end with it: after `process/terminate`,
 * session expiry, the end of a stdio session, server SIGTERM and server
 * SIGKILL.
 *
 * Every survivor is killed by pid at the end of each test.
 *
 * @module
 */

import assert from "node:assert/strict";
import { setTimeout as delay } from "node:timers/promises";
import { WATCHDOG_SCAN_MS } from "../lib/server/host/watchdog.ts";
import { SANDBOX } from "./helpers/attack.ts";
import { allProcesses, isWatchdog, procStat } from "./helpers/reliability_proc.ts";
import {
  eventually,
  handshake,
  pidsMatching,
  type ProtocolClient,
  ServerProcess,
} from "./helpers/server_harness.ts";

let nextId = 1;
let nextTag = 0;

/** A unique number used in the survivors' command lines. */
function tag(): string {
  return `${424242 + (Deno.pid % 1000) * 100 + nextTag++}`;
}

/** A command whose descendants escape the process group in four ways, each a `sleep <tag>.N`. */
function escapingScript(t: string): string {
  return [
    `setsid sleep ${t}.1 &`,
    `(sleep ${t}.2 &) ;`,
    `nohup sleep ${t}.3 >/dev/null 2>&1 &`,
    `sh -c 'trap "" TERM HUP; setsid sleep ${t}.4' &`,
    "echo started;",
    `sleep ${t}.5`,
  ].join(" ");
}

function survivors(t: string): number[] {
  return pidsMatching(new RegExp(`^\\s*sleep ${t}\\.\\d$`));
}

function killAll(pids: number[]): void {
  for (const pid of pids) {
    try {
      Deno.kill(pid, "SIGKILL");
    } catch {
      // Already gone.
    }
  }
}

/** Starts `script` as process `<prefix>-<t>` and waits until `count` of its `sleep <t>.N` run. */
async function startSleeps(
  client: ProtocolClient,
  t: string,
  tty: boolean,
  [prefix, script, count]: [string, string, number],
): Promise<string> {
  const processId = `${prefix}-${t}`;
  const response = await client.request(nextId++, "process/start", {
    processId,
    argv: ["/bin/sh", "-c", script],
    cwd: "file:///tmp",
    env: { PATH: "/usr/bin:/bin" },
    tty,
  });
  assert.ok(response.result, JSON.stringify(response));
  await client.log.waitUntil(
    () => client.log.outputText(processId, tty ? "pty" : "stdout").includes("started"),
    `${processId} to start`,
  );
  assert.ok(await eventually(() => survivors(t).length === count), `not all sleeps of ${t} run`);
  return processId;
}

/** Starts {@linkcode escapingScript}: its five sleeps run when it returns. */
function startEscaping(client: ProtocolClient, t: string, tty: boolean): Promise<string> {
  return startSleeps(client, t, tty, ["escaping", escapingScript(t), 5]);
}

/** Whether a process is gone or a zombie (a subreaper above may not collect it at once). */
function ended(pid: number): boolean {
  const state = procStat(pid)?.state;
  return state === undefined || state === "Z" || state === "X";
}

/** The watchdog children of a server. */
function watchdogsOf(server: number): number[] {
  return allProcesses().filter((p) => p.ppid === server && isWatchdog(p)).map((p) => p.pid);
}

/** Waits a bounded time for every `sleep <t>.N` to end; returns those left (and kills them). */
async function leftAfter(t: string): Promise<number[]> {
  await eventually(() => survivors(t).length === 0, 5_000);
  const left = survivors(t);
  killAll(left);
  return left;
}

for (const tty of [false, true]) {
  Deno.test(`process/terminate leaves no descendant of a ${tty ? "tty" : "pipe"} process, setsid and double forks included`, async () => {
    const t = tag();
    try {
      await using server = await ServerProcess.start({ listen: "stdio" });
      const client = server.stdio!;
      await handshake(client);
      const processId = await startEscaping(client, t, tty);
      await client.request(nextId++, "process/terminate", { processId });
      await client.log.processClosed(processId);
      assert.deepEqual(await leftAfter(t), [], "descendants survived process/terminate");
    } finally {
      killAll(survivors(t));
    }
  });
}

Deno.test("session expiry leaves no descendant, setsid and double forks included", async () => {
  const t = tag();
  try {
    await using server = await ServerProcess.start({ listen: "ws", args: ["--session-ttl", "1"] });
    const client = await server.connect();
    await handshake(client);
    await startEscaping(client, t, false);
    await client.close();
    await eventually(() => survivors(t).length === 0, 15_000);
    assert.deepEqual(await leftAfter(t), [], "descendants survived the session's expiry");
  } finally {
    killAll(survivors(t));
  }
});

Deno.test("the end of a stdio session leaves no descendant, setsid and double forks included", async () => {
  const t = tag();
  try {
    const server = await ServerProcess.start({ listen: "stdio" });
    await handshake(server.stdio!);
    await startEscaping(server.stdio!, t, false);
    await server.stop();
    assert.deepEqual(await leftAfter(t), [], "descendants survived the end of the session");
  } finally {
    killAll(survivors(t));
  }
});

const NAMESPACE_SKIP = SANDBOX.ok ? "" : ` (skipped: ${SANDBOX.ok || SANDBOX.reason})`;

for (
  const [signal, mode] of [
    ["SIGTERM", "default"],
    ["SIGKILL", "default"],
    ["SIGKILL", "--process-namespace"],
    ["SIGTERM", "--process-namespace"],
  ] as const
) {
  const reason = mode === "default" ? "" : NAMESPACE_SKIP;
  Deno.test({
    name: `server ${signal} leaves no descendant, setsid and double forks included${
      mode === "default" ? "" : ` (${mode})`
    }, and no watchdog${reason}`,
    ignore: reason !== "",
    fn: async () => {
      const t = tag();
      let watchdogs: number[] = [];
      try {
        await using server = await ServerProcess.start({
          listen: "ws",
          args: mode === "default" ? [] : [mode],
        });
        const client = await server.connect();
        await handshake(client);
        await startEscaping(client, t, false);
        // The watchdog starts before the first spawn.
        watchdogs = watchdogsOf(server.pid);
        server.kill(signal);
        await server.child.status;
        await client.close();
        assert.deepEqual(await leftAfter(t), [], `descendants survived server ${signal}`);
        assert.equal(watchdogs.length, 1, "the server ran one watchdog");
        assert.ok(
          await eventually(() => watchdogs.every(ended), 5_000),
          `the watchdog survived server ${signal}`,
        );
      } finally {
        killAll(survivors(t));
        killAll(watchdogs.filter((pid) => !ended(pid)));
      }
    },
  });
}

/** How many unrelated processes, older than the server, the crowded-host test runs. */
const CROWD = 2_000;

Deno.test(`server SIGKILL leaves no descendant on a host with ${CROWD} older processes`, async () => {
  // The watchdog's scan for marks visits every process on the host, in `sh`: reading the limits
  // of each (1.7 ms apiece here) kept it busy past leftAfter's bound; the crowd is older than the
  // server, so only its start is read.
  const [t, crowdTag] = [tag(), tag()];
  const crowd = new Deno.Command("/bin/sh", {
    args: [
      "-c",
      `i=0; while [ $i -lt ${CROWD} ]; do sleep ${crowdTag}.0 & i=$((i + 1)); done; wait`,
    ],
    stdin: "null",
    stdout: "null",
  }).spawn();
  let watchdogs: number[] = [];
  try {
    assert.ok(
      await eventually(() => survivors(crowdTag).length === CROWD, 30_000),
      "the crowd did not start",
    );
    await using server = await ServerProcess.start({ listen: "ws" });
    const client = await server.connect();
    await handshake(client);
    await startEscaping(client, t, false);
    watchdogs = watchdogsOf(server.pid);
    server.kill("SIGKILL");
    await server.child.status;
    await client.close();
    assert.deepEqual(await leftAfter(t), [], "descendants survived server SIGKILL");
    assert.ok(await eventually(() => watchdogs.every(ended), 5_000), "the watchdog survived");
  } finally {
    // The shells too: a watchdog killed here may have stopped them.
    killAll(tagged(t));
    killAll(watchdogs.filter((pid) => !ended(pid)));
    // The crowd's shell collects them, then exits.
    killAll(survivors(crowdTag));
    await crowd.status;
  }
});

Deno.test({
  name:
    `process/terminate leaves no descendant of a tty process (--process-namespace)${NAMESPACE_SKIP}`,
  ignore: NAMESPACE_SKIP !== "",
  async fn() {
    const t = tag();
    try {
      await using server = await ServerProcess.start({
        listen: "stdio",
        args: ["--process-namespace"],
      });
      const client = server.stdio!;
      await handshake(client);
      const processId = await startEscaping(client, t, true);
      await client.request(nextId++, "process/terminate", { processId });
      await client.log.processClosed(processId);
      assert.deepEqual(await leftAfter(t), [], "descendants survived process/terminate");
    } finally {
      killAll(survivors(t));
    }
  },
});

/** A `setsid` daemon from a double fork: it leaves the group and loses its parent at once. */
function daemonScript(t: string): string {
  return `(setsid sleep ${t}.1 &) ; echo started; sleep ${t}.2`;
}

/** Starts {@linkcode daemonScript}: the daemon and the leader's sleep run when it returns. */
function startDaemon(client: ProtocolClient, t: string, tty: boolean): Promise<string> {
  return startSleeps(client, t, tty, ["daemon", daemonScript(t), 2]);
}

for (const tty of [false, true]) {
  Deno.test(`process/terminate ends the setsid double-fork daemon of a ${tty ? "tty" : "pipe"} process, not another process's`, async () => {
    const [t, other] = [tag(), tag()];
    try {
      await using server = await ServerProcess.start({ listen: "stdio" });
      const client = server.stdio!;
      await handshake(client);
      const processId = await startDaemon(client, t, tty);
      await startDaemon(client, other, tty);
      await client.request(nextId++, "process/terminate", { processId });
      await client.log.processClosed(processId);
      assert.deepEqual(await leftAfter(t), [], "the daemon survived process/terminate");
      assert.equal(survivors(other).length, 2, "the other process's daemon was killed");
      // The mark is the child's only: the server's own limit is back to unlimited.
      const limits = await Deno.readTextFile(`/proc/${server.pid}/limits`);
      assert.match(limits, /^Max realtime timeout\s+unlimited\s/m);
    } finally {
      killAll(survivors(t));
      killAll(survivors(other));
    }
  });
}

Deno.test("session expiry ends the setsid double-fork daemon of its process, not another session's", async () => {
  const [t, other] = [tag(), tag()];
  try {
    await using server = await ServerProcess.start({ listen: "ws", args: ["--session-ttl", "1"] });
    const expiring = await server.connect();
    await handshake(expiring);
    await startDaemon(expiring, t, false);
    const staying = await server.connect();
    await handshake(staying);
    await startDaemon(staying, other, false);
    await expiring.close();
    await eventually(() => survivors(t).length === 0, 15_000);
    assert.deepEqual(await leftAfter(t), [], "the daemon survived the session's expiry");
    assert.equal(survivors(other).length, 2, "the other session's daemon was killed");
    await staying.close();
  } finally {
    killAll(survivors(t));
    killAll(survivors(other));
  }
});

Deno.test("a killed watchdog is replaced at the next spawn: server SIGKILL still leaves no descendant", async () => {
  const [t, later] = [tag(), tag()];
  let watchdogs: number[] = [];
  try {
    await using server = await ServerProcess.start({ listen: "ws" });
    const client = await server.connect();
    await handshake(client);
    await startEscaping(client, t, false);
    // The watchdog starts on an event-loop turn after the first spawn.
    assert.ok(await eventually(() => watchdogsOf(server.pid).length > 0), "no watchdog");
    const [first] = watchdogsOf(server.pid);
    assert.ok(first !== undefined, "no watchdog");
    // One of the server's processes could do this to outlive a server SIGKILL.
    Deno.kill(first, "SIGKILL");
    await eventually(() => ended(first));
    await startDaemon(client, later, false);
    assert.ok(await eventually(() => watchdogsOf(server.pid).some((pid) => pid !== first)));
    watchdogs = watchdogsOf(server.pid);
    await delay(WATCHDOG_SCAN_MS + 500);
    server.kill("SIGKILL");
    await server.child.status;
    await client.close();
    assert.deepEqual(await leftAfter(t), [], "the first tree survived server SIGKILL");
    assert.deepEqual(await leftAfter(later), [], "the later daemon survived server SIGKILL");
    assert.ok(await eventually(() => watchdogs.every(ended), 5_000), "the new watchdog survived");
  } finally {
    killAll(survivors(t));
    killAll(survivors(later));
    killAll(watchdogs.filter((pid) => !ended(pid)));
  }
});

Deno.test("a killed watchdog is replaced at the next scan, without a spawn: server SIGKILL still leaves no descendant", async () => {
  const t = tag();
  let watchdogs: number[] = [];
  try {
    await using server = await ServerProcess.start({ listen: "ws" });
    const client = await server.connect();
    await handshake(client);
    await startDaemon(client, t, false);
    // Once its daemon was told, the server has nothing more to write to the watchdog.
    await delay(WATCHDOG_SCAN_MS + 300);
    const [first] = watchdogsOf(server.pid);
    assert.ok(first !== undefined, "no watchdog");
    Deno.kill(first, "SIGKILL");
    assert.ok(
      await eventually(
        () => watchdogsOf(server.pid).some((pid) => pid !== first),
        3 * WATCHDOG_SCAN_MS,
      ),
      "the watchdog was not replaced",
    );
    watchdogs = watchdogsOf(server.pid);
    server.kill("SIGKILL");
    await server.child.status;
    await client.close();
    assert.deepEqual(await leftAfter(t), [], "the tree survived server SIGKILL");
    assert.ok(await eventually(() => watchdogs.every(ended), 5_000), "the new watchdog survived");
  } finally {
    killAll(survivors(t));
    killAll(watchdogs.filter((pid) => !ended(pid)));
  }
});

/**
 * Every shape of descendant at once, each a `sleep <t>.N`: a `&` job, a double fork, a `setsid`
 * job, a `setsid` daemon of a double fork, a `nohup` job, one under a shell that ignores TERM and
 * HUP, and the leader's own.
 */
function allShapesScript(t: string): string {
  return [
    `sleep ${t}.1 &`,
    `(sleep ${t}.2 &) ;`,
    `setsid sleep ${t}.3 &`,
    `(setsid sleep ${t}.4 &) ;`,
    `nohup sleep ${t}.5 >/dev/null 2>&1 &`,
    `sh -c 'trap "" TERM HUP; setsid sleep ${t}.6' &`,
    "echo started;",
    `sleep ${t}.7`,
  ].join(" ");
}

/** How many sleeps {@linkcode allShapesScript} runs. */
const ALL_SHAPES = 7;

/** Processes whose command line carries one of the tags: the sleeps and the shells around them. */
function tagged(...tags: string[]): number[] {
  return allProcesses().filter((p) => !ended(p.pid)).filter((p) => {
    try {
      const args = Deno.readTextFileSync(`/proc/${p.pid}/cmdline`);
      return tags.some((t) => args.includes(`${t}.`));
    } catch {
      return false;
    }
  }).map((p) => p.pid);
}

/**
 * One server SIGKILL: an old tree of every shape (older than the watchdog's scan), then a young
 * one (its orphans a few ms old), then the kill. With `first`, the young tree is the server's
 * first process, and the kill follows its `process/start` answer at once (`"at answer"`) or
 * the start of its sleeps (`"when running"`). Returns the survivors (killed by pid before
 * returning) and the server's watchdogs left running.
 */
async function sigkillRun(
  tty: boolean,
  first?: "at answer" | "when running",
): Promise<{ survivors: number; watchdogs: number }> {
  const [old, young] = [tag(), tag()];
  let watchdogs: number[] = [];
  try {
    await using server = await ServerProcess.start({ listen: "ws" });
    const client = await server.connect();
    await handshake(client);
    if (first === "when running") {
      await startSleeps(client, young, tty, ["young", allShapesScript(young), ALL_SHAPES]);
    } else if (first === "at answer") {
      const response = await client.request(nextId++, "process/start", {
        processId: `first-${young}`,
        argv: ["/bin/sh", "-c", allShapesScript(young)],
        cwd: "file:///tmp",
        env: { PATH: "/usr/bin:/bin" },
        tty,
      });
      assert.ok(response.result, JSON.stringify(response));
    } else {
      await startSleeps(client, old, tty, ["old", allShapesScript(old), ALL_SHAPES]);
      await delay(WATCHDOG_SCAN_MS + 300);
      await startSleeps(client, young, tty, ["young", allShapesScript(young), ALL_SHAPES]);
    }
    watchdogs = watchdogsOf(server.pid);
    server.kill("SIGKILL");
    await server.child.status;
    await client.close();
    await eventually(() => tagged(old, young).length === 0, 5_000);
    return {
      survivors: tagged(old, young).length,
      watchdogs: (await eventually(() => watchdogs.every(ended), 5_000)) ? 0 : watchdogs.length,
    };
  } finally {
    killAll(tagged(old, young));
    killAll(watchdogs.filter((pid) => !ended(pid)));
  }
}

/** How many times the server is SIGKILLed, for each kind of tree. */
const SIGKILL_RUNS = 20;

Deno.test(`server SIGKILL, ${SIGKILL_RUNS} times, leaves no descendant of any shape, young or old, with and without tty children, nor when it follows the first process/start`, async () => {
  const results: string[] = [];
  for (let run = 0; run < SIGKILL_RUNS; run++) {
    const [pipe, terminal, first] = await Promise.all([
      sigkillRun(false),
      sigkillRun(true),
      sigkillRun(run % 2 === 1, run % 4 < 2 ? "at answer" : "when running"),
    ]);
    results.push(
      `pipe ${pipe.survivors}/${pipe.watchdogs}, tty ${terminal.survivors}/${terminal.watchdogs}, first ${first.survivors}/${first.watchdogs}`,
    );
  }
  console.log(`survivors/watchdogs left per run:\n${results.join("\n")}`);
  assert.deepEqual(
    results.filter((r) => !/^pipe 0\/0, tty 0\/0, first 0\/0$/.test(r)),
    [],
    "runs with survivors",
  );
});

import assert from "node:assert/strict";
import { ErrorCode, RpcError } from "../lib/protocol/errors.ts";
import {
  livePtyProcesses,
  MAX_PTY_PROCESSES,
  type PtyProcess,
  type PtySpawnOptions,
  spawnPty,
} from "../lib/server/process/pty.ts";
import { ptySupported } from "../lib/server/process/pty_support.ts";
import { eventually } from "./helpers/server_harness.ts";

const ENV = { PATH: "/usr/bin:/bin" };
const decoder = new TextDecoder();
const encoder = new TextEncoder();

function start(argv: string[], options: Partial<PtySpawnOptions> = {}): PtyProcess {
  return spawnPty(argv, { cwd: "/tmp", env: ENV, ...options });
}

/** Reads until EOF and returns the output as text. */
async function readAll(child: PtyProcess): Promise<string> {
  let out = "";
  for (let chunk = await child.read(); chunk !== null; chunk = await child.read()) {
    out += decoder.decode(chunk, { stream: true });
  }
  return out;
}

/** Reads until the accumulated output contains `marker`; returns everything read. */
async function readUntil(child: PtyProcess, marker: string): Promise<string> {
  let out = "";
  while (!out.includes(marker)) {
    const chunk = await child.read();
    if (chunk === null) throw new Error(`EOF before ${JSON.stringify(marker)}: ${out}`);
    out += decoder.decode(chunk, { stream: true });
  }
  return out;
}

/** Runs a child to completion and returns its output and exit status. */
async function run(
  argv: string[],
  options: Partial<PtySpawnOptions> = {},
): Promise<{ out: string; code: number; signal: number | null }> {
  const child = start(argv, options);
  try {
    const out = await readAll(child);
    return { out, ...await child.status };
  } finally {
    child.close();
  }
}

function spawnErrorOf(fn: () => unknown): { message: string; kind: unknown } {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof RpcError);
    assert.equal(err.code, ErrorCode.InternalError);
    return { message: err.message, kind: (err.data as { kind?: unknown }).kind };
  }
  assert.fail("expected spawnPty to throw");
}

// Deno only lets a fully privileged process read /proc directly, so ask a helper program.
async function procRead(program: string, args: string[]): Promise<string | null> {
  const { success, stdout } = await new Deno.Command(program, { args, stderr: "null" }).output();
  return success ? decoder.decode(stdout) : null;
}

/** Counts this process's descriptors of the kinds a pty process opens. */
function ptyFdCount(): number {
  // Deno needs full privileges to read /proc/self/fd, and a helper process would race with
  // descriptors Deno opens for it, so ask libc directly.
  const lib = Deno.dlopen("libc.so.6", {
    readlink: { parameters: ["buffer", "buffer", "usize"], result: "isize" },
  });
  try {
    const target = new Uint8Array(256);
    let count = 0;
    for (let fd = 0; fd < 4096; fd++) {
      const path = encoder.encode(`/proc/self/fd/${fd}\0`);
      const n = Number(lib.symbols.readlink(path, target, 256n));
      if (n <= 0) continue;
      const name = decoder.decode(target.subarray(0, n));
      if (/^(\/dev\/ptmx|anon_inode:\[(pidfd|eventfd)\])$/.test(name)) count++;
    }
    return count;
  } finally {
    lib.close();
  }
}

/** Fields of /proc/<pid>/stat after the command name, or null when the process is gone. */
async function procStat(pid: number): Promise<string[] | null> {
  const text = await procRead("/bin/cat", [`/proc/${pid}/stat`]);
  return text === null ? null : text.slice(text.lastIndexOf(")") + 2).trim().split(" ");
}

/** `procStat` once the process is gone or a zombie, or its last state after 100 looks 50 ms apart. */
async function deadOrZombie(pid: number): Promise<string[] | null> {
  let stat = await procStat(pid);
  for (let tries = 0; tries < 100 && stat !== null && stat[0] !== "Z"; tries++) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    stat = await procStat(pid);
  }
  return stat;
}

Deno.test("ptySupported() is true on Linux with the FFI permission", () => {
  assert.equal(ptySupported(), true);
  assert.equal(MAX_PTY_PROCESSES, 1024);
});

Deno.test("spawnPty() output goes through the line discipline", async () => {
  assert.deepEqual(await run(["/usr/bin/printf", "a\\nb"]), {
    out: "a\r\nb",
    code: 0,
    signal: null,
  });
});

Deno.test("spawnPty() reports a normal exit code as is", async () => {
  assert.deepEqual(await run(["/bin/sh", "-c", "exit 3"]), { out: "", code: 3, signal: null });
});

Deno.test("spawnPty() gives the child a controlling terminal in a new session", async () => {
  const child = start(["/bin/sh", "-c", "tty; test -t 0 -a -t 1 -a -t 2 && echo all-tty; read x"]);
  try {
    const out = await readUntil(child, "all-tty\r\n");
    assert.match(out, /^\/dev\/pts\/\d+\r\nall-tty\r\n$/);
    const stat = await procStat(child.pid);
    assert.ok(stat !== null);
    // state ppid pgrp session tty_nr tpgid
    const [, , pgrp, session, ttyNr, tpgid] = stat;
    assert.equal(Number(session), child.pid);
    assert.equal(Number(pgrp), child.pid);
    assert.notEqual(Number(ttyNr), 0);
    assert.equal(Number(tpgid), child.pid);
    await child.write(encoder.encode("\n"));
    assert.equal(await readAll(child), "\r\n");
    assert.deepEqual(await child.status, { code: 0, signal: null });
  } finally {
    child.close();
  }
});

Deno.test("spawnPty() opens a 24x80 window by default and honours rows/cols", async () => {
  assert.equal((await run(["/bin/stty", "size"])).out, "24 80\r\n");
  assert.equal((await run(["/bin/stty", "size"], { rows: 30, cols: 100 })).out, "30 100\r\n");
});

Deno.test("PtyProcess.resize() changes the size the child sees", async () => {
  const child = start(["/bin/sh", "-c", "stty -echo; echo ready; read x; stty size"]);
  try {
    await readUntil(child, "ready\r\n");
    child.resize(50, 132);
    await child.write(encoder.encode("\n"));
    assert.equal(await readAll(child), "50 132\r\n");
    assert.deepEqual(await child.status, { code: 0, signal: null });
  } finally {
    child.close();
  }
});

Deno.test("PtyProcess.resize() sends SIGWINCH to the foreground group", async () => {
  const child = start([
    "/bin/sh",
    "-c",
    "trap 'echo winch; exit 0' WINCH; echo ready; while :; do sleep 0.05; done",
  ]);
  try {
    await readUntil(child, "ready\r\n");
    child.resize(40, 90);
    assert.equal(await readAll(child), "winch\r\n");
    assert.deepEqual(await child.status, { code: 0, signal: null });
  } finally {
    child.close();
  }
});

Deno.test("spawnPty() children share one waiting thread, leaving the pool to others", async () => {
  // Deno caps its blocking pool at about 32 threads; 40 children waiting on input must not
  // starve file system operations.
  const children = Array.from(
    { length: 40 },
    () => start(["/bin/sh", "-c", "stty -echo; echo ready; read x; echo got-$x"]),
  );
  try {
    await Promise.all(children.map((child) => readUntil(child, "ready\r\n")));
    const outputs = children.map((child) => readAll(child));
    assert.ok((await Deno.stat("/")).isDirectory);
    await Promise.all(children.map((child, i) => child.write(encoder.encode(`${i}\n`))));
    assert.deepEqual(await Promise.all(outputs), children.map((_, i) => `got-${i}\r\n`));
    for (const child of children) assert.equal((await child.status).code, 0);
  } finally {
    for (const child of children) child.close();
  }
});

Deno.test("PtyProcess.write() input is echoed and run by an interactive shell", async () => {
  const child = start(["/bin/sh"], { env: { ...ENV, PS1: "prompt> " } });
  try {
    assert.equal(await readUntil(child, "prompt> "), "prompt> ");
    await child.write(encoder.encode("echo hi\n"));
    assert.equal(await readUntil(child, "prompt> "), "echo hi\r\nhi\r\nprompt> ");
    await child.write(encoder.encode("exit 7\n"));
    await readAll(child);
    assert.deepEqual(await child.status, { code: 7, signal: null });
  } finally {
    child.close();
  }
});

Deno.test("PtyProcess.write() delivers large and concurrent writes whole and in order", async () => {
  const child = start(["/bin/sh", "-c", "stty -icanon -echo; echo ready; head -c 300006 | wc -c"]);
  try {
    await readUntil(child, "ready\r\n");
    const big = new Uint8Array(300000).fill(0x61);
    await Promise.all([
      child.write(encoder.encode("abc")),
      child.write(big),
      child.write(new Uint8Array(0)),
      child.write(encoder.encode("def")),
    ]);
    assert.equal((await readAll(child)).trim(), "300006");
    assert.deepEqual(await child.status, { code: 0, signal: null });
  } finally {
    child.close();
  }
  const order = start(["/bin/sh", "-c", "stty -icanon -echo; echo ready; head -c 6"]);
  try {
    await readUntil(order, "ready\r\n");
    await Promise.all([order.write(encoder.encode("abc")), order.write(encoder.encode("def"))]);
    assert.equal(await readAll(order), "abcdef");
  } finally {
    order.close();
  }
});

Deno.test("PtyProcess.kill() SIGINT ends a sleep with tty exit code 1", async () => {
  const child = start(["/bin/sleep", "1000"]);
  try {
    child.kill("SIGINT");
    assert.deepEqual(await child.status, { code: 1, signal: 2 });
    assert.equal(await readAll(child), "");
  } finally {
    child.close();
  }
});

Deno.test("PtyProcess.kill() SIGKILL takes down the whole process group", async () => {
  const child = start(["/bin/sh", "-c", "sleep 1000 & echo bg=$!; sleep 1000"]);
  try {
    const out = await readUntil(child, "\r\n");
    const background = Number(/bg=(\d+)/.exec(out)?.[1]);
    assert.ok(background > 0);
    assert.notEqual(await procStat(background), null);
    child.kill("SIGKILL");
    assert.deepEqual(await child.status, { code: 1, signal: 9 });
    // EOF on the master means every process holding the slave, the background sleep
    // included, has released its files: it is on its way out. It releases them before it
    // turns into a zombie, so under load /proc can still show it running for a moment;
    // wait (bounded) for it to finish dying instead of sampling that moment.
    await readAll(child);
    const stat = await deadOrZombie(background);
    assert.ok(stat === null || stat[0] === "Z", `background sleep still alive: ${stat}`);
  } finally {
    child.close();
  }
});

Deno.test("PtyProcess.kill() after the group is gone is ignored", async () => {
  const child = start(["/bin/true"]);
  try {
    await child.status;
    child.kill("SIGTERM");
  } finally {
    child.close();
  }
});

Deno.test("PtyProcess.interrupt() before and after close, once the child is gone, is ignored", async () => {
  const child = start(["/bin/true"]);
  try {
    await child.status;
    child.interrupt();
  } finally {
    child.close();
  }
  child.interrupt();
});

Deno.test("spawnPty() passes arg0 as $0 and executes argv[0]", async () => {
  assert.equal(
    (await run(["/bin/sh", "-c", "echo $0"], { arg0: "custom-name" })).out,
    "custom-name\r\n",
  );
});

Deno.test("spawnPty() gives the child exactly the given environment", async () => {
  const { out } = await run(["/usr/bin/env"], { env: { A: "1", B: "two words" } });
  assert.deepEqual(out.split("\r\n").filter((line) => line !== "").sort(), ["A=1", "B=two words"]);
});

Deno.test("spawnPty() runs the child in cwd", async () => {
  assert.equal((await run(["/bin/pwd"], { cwd: "/usr" })).out, "/usr\r\n");
});

Deno.test("spawnPty() falls back to HOME when cwd is not a directory, like the reference", async () => {
  const env = { ...ENV, HOME: "/usr" };
  assert.equal((await run(["/bin/pwd"], { cwd: "/nonexistent", env })).out, "/usr\r\n");
  assert.equal((await run(["/bin/pwd"], { cwd: "/etc/passwd", env })).out, "/usr\r\n");
  assert.deepEqual(
    spawnErrorOf(() => start(["/bin/pwd"], { cwd: "/nonexistent", env: { HOME: "/nope" } })),
    { kind: "spawnNotFound", message: "No such file or directory (os error 2)" },
  );
});

Deno.test("spawnPty() maps exec failures to spawn error kinds", () => {
  assert.deepEqual(spawnErrorOf(() => start(["/nonexistent/prog"])), {
    kind: "spawnNotFound",
    message: "No such file or directory (os error 2)",
  });
  assert.deepEqual(spawnErrorOf(() => start(["/etc/passwd"])), {
    kind: "spawnPermissionDenied",
    message: "Permission denied (os error 13)",
  });
  assert.deepEqual(spawnErrorOf(() => start(["/tmp"])), {
    kind: "spawnPermissionDenied",
    message: "Permission denied (os error 13)",
  });
});

Deno.test("spawnPty() searches only the child's PATH", async (t) => {
  await t.step("not found", () => {
    assert.deepEqual(spawnErrorOf(() => start(["nope"], { env: { PATH: "/nonexistent" } })), {
      kind: "spawnFailed",
      message: 'Unable to spawn nope because:\nNo viable candidates found in PATH "/nonexistent"',
    });
  });
  await t.step("no PATH", () => {
    assert.deepEqual(spawnErrorOf(() => start(["env"], { env: {} })), {
      kind: "spawnFailed",
      message: "Unable to spawn env because:\nUnable to resolve the PATH",
    });
  });
  await t.step("rejected candidates are listed", () => {
    const dir = Deno.makeTempDirSync();
    try {
      Deno.mkdirSync(`${dir}/adir`);
      Deno.writeTextFileSync(`${dir}/plain`, "x");
      const path = `${dir}:/nonexistent`;
      assert.deepEqual(spawnErrorOf(() => start(["adir"], { env: { PATH: path } })), {
        kind: "spawnFailed",
        message:
          `Unable to spawn adir because:\n${dir}/adir exists but is a directory.\nNo viable candidates found in PATH "${path}"`,
      });
      assert.deepEqual(spawnErrorOf(() => start(["plain"], { env: { PATH: path } })), {
        kind: "spawnFailed",
        message:
          `Unable to spawn plain because:\n${dir}/plain exists but is not executable.\nNo viable candidates found in PATH "${path}"`,
      });
    } finally {
      Deno.removeSync(dir, { recursive: true });
    }
  });
  await t.step("found in PATH, ./ relative to cwd", async () => {
    assert.equal((await run(["echo", "found"])).out, "found\r\n");
    assert.equal((await run(["./echo", "dot"], { cwd: "/bin", env: {} })).out, "dot\r\n");
    assert.deepEqual(spawnErrorOf(() => start(["./nope"], { cwd: "/tmp" })), {
      kind: "spawnFailed",
      message: "Unable to spawn /tmp/./nope because it does not exist",
    });
  });
});

Deno.test("spawnPty() rejects an empty program like the reference", () => {
  assert.deepEqual(spawnErrorOf(() => start([""])), {
    kind: "spawnFailed",
    message: "missing program for PTY spawn",
  });
});

Deno.test("spawnPty() rejects NUL bytes like the reference", () => {
  assert.deepEqual(spawnErrorOf(() => start(["/bin/echo", "a\0b"])), {
    kind: "spawnFailed",
    message: "nul byte found in provided data",
  });
  assert.deepEqual(spawnErrorOf(() => start(["/bin/echo"], { env: { A: "a\0b" } })), {
    kind: "spawnFailed",
    message: "data provided contains a nul byte",
  });
});

Deno.test("spawnPty() child inherits no descriptors beyond 0, 1 and 2", async () => {
  const { out } = await run(["/bin/ls", "/proc/self/fd"]);
  // ls itself holds fd 3 open on the directory it lists.
  assert.deepEqual(out.trim().split(/\s+/), ["0", "1", "2", "3"]);
});

Deno.test("PtyProcess.close() releases every descriptor", async () => {
  const before = ptyFdCount();
  await run(["/bin/echo", "x"]);
  spawnErrorOf(() => start(["/nonexistent/prog"]));
  spawnErrorOf(() => start(["nope"]));
  // Closed while still running and while a read is waiting.
  const child = start(["/bin/sleep", "1000"]);
  const pending = child.read();
  // The pty master, the child's pidfd and the shared poll loop's eventfd.
  assert.equal(ptyFdCount(), before + 3);
  child.close();
  assert.equal(await pending, null);
  assert.equal(await child.read(), null);
  await assert.rejects(child.write(encoder.encode("x")), /closed/);
  // Closing the master hangs up the terminal: the kernel sends SIGHUP to the session leader.
  assert.deepEqual(await child.status, { code: 1, signal: 1 });
  assert.equal(ptyFdCount(), before);
});

Deno.test("spawnPty() refuses the live pty process beyond its limit with limitReached, and spawns again once one is released", async () => {
  // The bound itself is 1024 (MAX_PTY_PROCESSES); a lower limit through the same check keeps CI cheap.
  assert.ok(await eventually(() => livePtyProcesses() === 0), "ptys of earlier tests released");
  const limit = 3;
  const children = Array.from(
    { length: limit },
    () => start(["/bin/sleep", "1000"], { maxLive: limit }),
  );
  try {
    assert.equal(livePtyProcesses(), limit);
    assert.deepEqual(spawnErrorOf(() => start(["/bin/true"], { maxLive: limit })), {
      message: `Cannot spawn a pty process: the limit of ${limit} live pty processes is reached`,
      kind: "limitReached",
    });
    const first = children.shift()!;
    first.kill("SIGKILL");
    first.close();
    await first.status;
    assert.ok(await eventually(() => livePtyProcesses() < limit), "the killed pty is released");
    children.push(start(["/bin/sleep", "1000"], { maxLive: limit }));
    assert.equal(livePtyProcesses(), limit);
  } finally {
    for (const child of children) {
      child.kill("SIGKILL");
      child.close();
      await child.status;
    }
  }
});

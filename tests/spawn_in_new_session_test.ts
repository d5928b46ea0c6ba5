import assert from "node:assert/strict";
import { type ChildExit, watchChildExit } from "../lib/server/host/child_exits.ts";
import {
  C,
  closeFd,
  cString,
  errno,
  fileControl,
  fileKind,
  getenv,
  isExecutable,
  spawnAttributes,
  spawnInNewSession,
  strerror,
} from "../lib/server/host/libc.ts";

const O_WRONLY = 0o1;
const devNull = { open: cString("/dev/null"), flags: C.O_RDWR };
const NULL_STDIO = [devNull, devNull, devNull] as const;

function exitOf(pid: number): Promise<ChildExit> {
  const { promise, resolve } = Promise.withResolvers<ChildExit>();
  watchChildExit(pid, resolve);
  return promise;
}

/** Runs `script` under /bin/sh with stdout into a temporary file; returns what it wrote. */
async function shellOutput(script: string): Promise<{ exit: ChildExit; output: string }> {
  const file = await Deno.makeTempFile();
  try {
    const pid = spawnInNewSession("/bin/sh", ["sh", "-c", script], ["PATH=/usr/bin:/bin"], "/", [
      { open: cString("/dev/null"), flags: C.O_RDONLY },
      { open: cString(file), flags: O_WRONLY },
      { dup: 1 },
    ]);
    const exit = await exitOf(pid);
    return { exit, output: await Deno.readTextFile(file) };
  } finally {
    await Deno.remove(file);
  }
}

Deno.test("spawnInNewSession starts the child as the leader of a new session and process group", async () => {
  const { exit, output } = await shellOutput("cat /proc/$$/stat; echo; echo $$");
  assert.deepEqual(exit, { code: 0, signal: null });
  const [stat, pid] = output.split("\n").filter((line) => line !== "");
  const fields = stat!.slice(stat!.lastIndexOf(")") + 2).split(" ");
  assert.deepEqual([fields[2], fields[3]], [pid, pid]);
});

Deno.test("spawnInNewSession gives the child no descriptor beyond 0, 1 and 2, and every standard signal at its default disposition", async () => {
  // `ls` lists its own descriptors, among them the one of the directory it reads.
  const { output } = await shellOutput("ls /proc/self/fd; grep SigIgn /proc/self/status");
  const [fds, ignored] = output.split("SigIgn:");
  assert.deepEqual(fds!.trim().split("\n"), ["0", "1", "2", "3"]);
  // Signals 1–31; glibc keeps its own 32 and 33 as they are (as for Deno's own spawns).
  assert.equal(BigInt(`0x${ignored!.trim()}`) & 0x7fffffffn, 0n);
});

Deno.test("spawnInNewSession reports a missing program by its errno", () => {
  assert.throws(() => spawnInNewSession("/nonexistent/program", ["program"], [], "/", NULL_STDIO), {
    code: C.ENOENT,
  });
});

Deno.test("watchChildExit reports the exit code, and the signal that ended a child", async () => {
  const exited = spawnInNewSession("/bin/sh", ["sh", "-c", "exit 7"], [], "/", NULL_STDIO);
  assert.deepEqual(await exitOf(exited), { code: 7, signal: null });
  const sleeping = spawnInNewSession("/bin/sleep", ["sleep", "30"], [], "/", NULL_STDIO);
  const exit = exitOf(sleeping);
  Deno.kill(sleeping, "SIGKILL");
  assert.deepEqual(await exit, { code: null, signal: 9 });
});

Deno.test("spawnAttributes is the posix_spawnattr_t that glibc's init and setters make", () => {
  const glibc = Deno.dlopen("libc.so.6", {
    posix_spawnattr_init: { parameters: ["buffer"], result: "i32" },
    posix_spawnattr_setflags: { parameters: ["buffer", "i16"], result: "i32" },
    posix_spawnattr_setsigmask: { parameters: ["buffer", "buffer"], result: "i32" },
    posix_spawnattr_setsigdefault: { parameters: ["buffer", "buffer"], result: "i32" },
    sigemptyset: { parameters: ["buffer"], result: "i32" },
    sigfillset: { parameters: ["buffer"], result: "i32" },
  });
  try {
    const lib = glibc.symbols;
    // Garbage first: init must be what clears every byte.
    const attr = new Uint8Array(336).fill(0xa5);
    const empty = new Uint8Array(128);
    const full = new Uint8Array(128);
    assert.equal(lib.sigemptyset(empty), 0);
    assert.equal(lib.sigfillset(full), 0);
    assert.equal(lib.posix_spawnattr_init(attr), 0);
    const flags = C.POSIX_SPAWN_SETSID | C.POSIX_SPAWN_SETSIGMASK | C.POSIX_SPAWN_SETSIGDEF;
    assert.equal(lib.posix_spawnattr_setflags(attr, flags), 0);
    assert.equal(lib.posix_spawnattr_setsigmask(attr, empty), 0);
    assert.equal(lib.posix_spawnattr_setsigdefault(attr, full), 0);
    assert.deepEqual(spawnAttributes(), attr);
  } finally {
    glibc.close();
  }
});

Deno.test("spawnInNewSession's zeroed file actions are what glibc's posix_spawn_file_actions_init makes", () => {
  const glibc = Deno.dlopen("libc.so.6", {
    posix_spawn_file_actions_init: { parameters: ["buffer"], result: "i32" },
    posix_spawn_file_actions_destroy: { parameters: ["buffer"], result: "i32" },
  });
  try {
    // glibc's posix_spawn_file_actions_t is 80 bytes; spawnInNewSession zeroes 256.
    const actions = new Uint8Array(256).fill(0xa5);
    assert.equal(glibc.symbols.posix_spawn_file_actions_init(actions), 0);
    assert.deepEqual(actions.subarray(0, 80), new Uint8Array(80));
    assert.equal(glibc.symbols.posix_spawn_file_actions_destroy(actions), 0);
  } finally {
    glibc.close();
  }
});

Deno.test("the spawn binding's by-value first argument and struct result reach the C calls as plain integers: a bad descriptor's close fails with EBADF, a good fcntl answers", () => {
  const EBADF = 9;
  assert.equal(closeFd(1 << 20), -1);
  assert.equal(errno(), EBADF);
  // F_GETFD of stdin: its flags (a non-negative number), not an error.
  assert.ok(fileControl(0, 1, 0) >= 0);
});

Deno.test("the pty binding's by-value first arguments reach the C calls: an error number, and a C string's address", () => {
  assert.equal(strerror(C.ENOENT), "No such file or directory");
  assert.equal(getenv("PATH"), Deno.env.get("PATH"));
  assert.equal(getenv("EXEC_SERVER_NO_SUCH_VARIABLE"), null);
  assert.equal(fileKind("/"), "directory");
  assert.equal(fileKind("/etc/passwd"), "other");
  assert.equal(fileKind("/nonexistent"), "missing");
  assert.equal(isExecutable("/bin/sh"), true);
  assert.equal(isExecutable("/etc/passwd"), false);
});

Deno.test("keepAlive keeps the buffers it is given reachable through a collection, and lets them go with its next call", async () => {
  // A collection is only forced with --expose-gc, so the check runs in a child deno.
  const libc = new URL("../lib/server/host/libc.ts", import.meta.url).href;
  const script = `
    import { cString, keepAlive } from ${JSON.stringify(libc)};
    const turn = () => new Promise((resolve) => setTimeout(resolve, 0));
    let buffer = cString("kept");
    const ref = new WeakRef(buffer);
    keepAlive(buffer);
    buffer = null;
    await turn();
    globalThis.gc();
    const keptThrough = ref.deref() !== undefined;
    keepAlive();
    await turn();
    globalThis.gc();
    console.log(JSON.stringify({ keptThrough, released: ref.deref() === undefined }));
  `;
  const file = await Deno.makeTempFile({ suffix: ".ts" });
  try {
    await Deno.writeTextFile(file, script);
    const { code, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
      args: ["run", "--allow-all", "--v8-flags=--expose-gc", file],
    }).output();
    assert.equal(code, 0, new TextDecoder().decode(stderr));
    assert.deepEqual(JSON.parse(new TextDecoder().decode(stdout)), {
      keptThrough: true,
      released: true,
    });
  } finally {
    await Deno.remove(file);
  }
});

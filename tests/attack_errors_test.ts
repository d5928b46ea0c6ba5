/**
 * Wrong errors: a failed pipe spawn used to be reported as "No such file or
 * directory" whatever the OS said (a 3 MB argv, E2BIG, looked like a missing
 * program). The errno the OS reported now reaches the client.
 *
 * @module
 */

import assert from "node:assert/strict";
import { startParams } from "./helpers/rpc.ts";
import { handshake, MAIN_TS, SERVER_PERMISSIONS, ServerProcess } from "./helpers/server_harness.ts";

Deno.test("process/start with a 3 MB argument gets spawnFailed with E2BIG's message, not spawnNotFound", async () => {
  await using server = await ServerProcess.start({ listen: "ws" });
  await using client = await server.connect();
  await handshake(client);
  const reply = await client.request(
    1,
    "process/start",
    startParams("big", ["/bin/echo", "x".repeat(3_000_000)]),
  );
  const error = reply.error as { code: number; message: string; data?: unknown };
  assert.deepEqual([error.code, error.message, error.data], [
    -32603,
    "Argument list too long (os error 7)",
    { kind: "spawnFailed" },
  ]);
  const ok = await client.request(2, "process/start", startParams("small", ["/bin/echo", "x"]));
  assert.ok(ok.result, JSON.stringify(ok));
});

Deno.test("out of descriptors, fs/open and process/start report EMFILE's own message, then work again", async () => {
  await using server = await ServerProcess.start({
    listen: "ws",
    command: [
      "/bin/sh",
      "-c",
      'ulimit -n 64 && exec "$@"',
      "sh",
      Deno.execPath(),
      "run",
      ...SERVER_PERMISSIONS,
      MAIN_TS,
    ],
  });
  const file = await Deno.makeTempFile({ prefix: "es-emfile-" });
  await using client = await server.connect();
  await handshake(client);
  let id = 1;
  let opened = 0;
  let refusal: { code: number; message: string; data?: unknown } | undefined;
  while (refusal === undefined && opened < 100) {
    const reply = await client.request(id++, "fs/open", {
      handleId: `h${opened}`,
      path: `file://${file}`,
      mode: "read",
    });
    if (reply.error) refusal = reply.error as { code: number; message: string; data?: unknown };
    else opened++;
  }
  assert.deepEqual(refusal, {
    code: -32603,
    message: "No file descriptors available (os error 24)",
    data: { kind: "osError", errno: "EMFILE" },
  });
  const spawn = await client.request(id++, "process/start", startParams("p", ["/bin/true"]));
  const error = spawn.error as { code: number; message: string; data?: unknown };
  assert.deepEqual([error.code, error.message, error.data], [
    -32603,
    "No file descriptors available (os error 24)",
    { kind: "spawnFailed" },
  ]);
  for (let i = 0; i < opened; i++) await client.request(id++, "fs/close", { handleId: `h${i}` });
  const again = await client.request(id++, "process/start", startParams("p", ["/bin/true"]));
  assert.ok(again.result, JSON.stringify(again));
  await Deno.remove(file);
});

/**
 * How a start in no executable format is spawned: with FFI `posix_spawn` reports the kernel's
 * ENOEXEC (pipe and tty alike), also for an ELF header of no machine (`e_machine` 0); without it
 * `node:child_process` would run the file through `/bin/sh`, so the file's first bytes are
 * checked first, which takes any ELF header for an executable (`noExec` lists what is refused).
 */
const NO_EXEC_FORMAT_MODES = [
  {
    mode: "pipe, posix_spawn",
    tty: false,
    permissions: SERVER_PERMISSIONS,
    noExec: ["text", "garbage", "empty", "elf"],
  },
  {
    mode: "tty, posix_spawn",
    tty: true,
    permissions: SERVER_PERMISSIONS,
    noExec: ["text", "garbage", "empty", "elf"],
  },
  {
    mode: "pipe without --allow-ffi, node:child_process",
    tty: false,
    permissions: SERVER_PERMISSIONS.filter((flag) => flag !== "--allow-ffi"),
    noExec: ["text", "garbage", "empty"],
  },
];

/** The 20 first bytes of a 64-bit little-endian ELF header for no machine (`e_machine` 0). */
const ELF_FOR_NO_MACHINE = [0x7f, 0x45, 0x4c, 0x46, 2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0];

for (const { mode, tty, permissions, noExec } of NO_EXEC_FORMAT_MODES) {
  Deno.test(`process/start of an executable file in no executable format gets spawnFailed ENOEXEC, as the reference (${mode})`, async () => {
    const dir = await Deno.makeTempDir({ prefix: "es-noexec-" });
    try {
      await Deno.writeTextFile(`${dir}/text`, "echo not a script\n", { mode: 0o755 });
      await Deno.writeFile(`${dir}/garbage`, new Uint8Array([1, 2, 3, 4, 5]), { mode: 0o755 });
      await Deno.writeFile(`${dir}/empty`, new Uint8Array(0), { mode: 0o755 });
      await Deno.writeFile(`${dir}/elf`, new Uint8Array(ELF_FOR_NO_MACHINE), { mode: 0o755 });
      await Deno.writeTextFile(`${dir}/script`, "#!/bin/sh\necho ok\n", { mode: 0o755 });
      await using server = await ServerProcess.start({ listen: "ws", permissions });
      await using client = await server.connect();
      await handshake(client);
      let id = 1;
      for (const name of noExec) {
        const reply = await client.request(
          id++,
          "process/start",
          startParams(name, [`${dir}/${name}`], { tty }),
        );
        const error = reply.error as { code: number; message: string; data?: unknown };
        assert.deepEqual([error?.code, error?.message, error?.data], [
          -32603,
          "Exec format error (os error 8)",
          { kind: "spawnFailed" },
        ], name);
      }
      const script = await client.request(
        id++,
        "process/start",
        startParams("script", [`${dir}/script`], { tty }),
      );
      assert.ok(script.result, JSON.stringify(script));
      await client.log.processClosed("script");
      // A terminal reports one "pty" stream and turns the script's "\n" into "\r\n".
      const output = tty ? client.log.outputText("script", "pty") : client.log.outputText("script");
      assert.equal(output, tty ? "ok\r\n" : "ok\n");
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  });
}

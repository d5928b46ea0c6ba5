/**
 * How the sandbox layer is chosen (`lib/server/sandbox/layer.ts`): where
 * bubblewrap cannot mount a fresh `/proc` (reproduced here with a mount
 * namespace whose `/proc` has a mount over part of it, as a container's
 * masked `/proc` has: the kernel then refuses a fresh one to a user
 * namespace), the server falls back to bubblewrap without one, says so once
 * in its log, and its sandboxes see the host's `/proc` read-only.
 *
 * @module
 */

import assert from "node:assert/strict";
import { handshake, MAIN_TS, SERVER_PERMISSIONS, startStdio } from "./helpers/server_harness.ts";
import { TEST_LAYERS } from "./helpers/sandbox_layers.ts";
import { sandboxValue } from "./helpers/attack.ts";
import { call } from "./helpers/rpc.ts";
import { docBlock } from "./helpers/doc_blocks.ts";

const UNSHARE = ["/usr/bin/unshare", "/bin/unshare"].find((path) => {
  try {
    return Deno.statSync(path).isFile;
  } catch {
    return false;
  }
});

/** A directory of `/proc` to mount over (what container runtimes mask). */
const MASKED = ["/proc/acpi", "/proc/scsi", "/proc/driver", "/proc/sys/vm"].find((path) => {
  try {
    return Deno.statSync(path).isDirectory;
  } catch {
    return false;
  }
});

const NO_PROC = TEST_LAYERS.find((t) => t.layer === "bubblewrap-no-proc")!;
const SKIP = NO_PROC.skip ||
  (Deno.uid() !== 0
    ? " (ignored: making a mount namespace with a masked /proc needs root)"
    : UNSHARE === undefined
    ? " (ignored: no unshare)"
    : MASKED === undefined
    ? " (ignored: no /proc directory to mask)"
    : "");

Deno.test({
  name:
    `where bubblewrap cannot mount /proc, the server uses bubblewrap without it, logs that once, and its sandboxes see the host's /proc read-only${SKIP}`,
  ignore: SKIP !== "",
  async fn() {
    const workspace = await Deno.makeTempDir({ dir: "/var/tmp", prefix: "no-proc-" });
    try {
      await using server = await startStdio({
        command: [
          UNSHARE!,
          "--mount",
          "--propagation",
          "private",
          "/bin/sh",
          "-c",
          'mount -t tmpfs tmpfs "$0" && exec "$@"',
          MASKED!,
          Deno.execPath(),
          "run",
          ...SERVER_PERMISSIONS,
          MAIN_TS,
        ],
        args: ["--log-level", "info", "--log-format", "json"],
      });
      await handshake(server.stdio);
      const sandbox = sandboxValue([workspace], "restricted");
      for (const processId of ["first", "second"]) {
        await call(server.stdio, "process/start", {
          processId,
          argv: [
            "/bin/sh",
            "-c",
            "echo pid=$$; echo x > /proc/self/comm || echo PROC_READ_ONLY; " +
            `echo in > ${workspace}/${processId} && echo WROTE`,
          ],
          cwd: `file://${workspace}`,
          env: { PATH: "/usr/bin:/bin" },
          tty: false,
          sandbox,
        });
        await server.stdio.log.processClosed(processId);
        const output = server.stdio.log.outputText(processId);
        assert.match(output, /^pid=2$/m, "its own PID namespace");
        assert.match(output, /PROC_READ_ONLY/, output);
        assert.match(output, /WROTE/, output);
        assert.match(
          server.stdio.log.outputText(processId, "stderr"),
          /Read-only file system/,
        );
      }
      await server.stop();
      const lines = (await server.stderr).split("\n").filter((line) => line.startsWith("{"))
        .map((line) => JSON.parse(line));
      const warnings = lines.filter((line) =>
        /cannot mount a fresh \/proc/.test(line.message ?? "")
      );
      assert.equal(warnings.length, 1, await server.stderr);
      const starts = lines.filter((line) => line.event === "process.start");
      assert.deepEqual(starts.map((line) => line.sandboxLayer), [
        "bubblewrap-no-proc",
        "bubblewrap-no-proc",
      ]);
    } finally {
      await Deno.remove(workspace, { recursive: true });
    }
  },
});

Deno.test("a sandboxed process/start no layer can enforce is refused with data.kind sandboxUnavailable naming what is missing, and a confining --sandbox does not start", async () => {
  // Landlock forced, and the server may not run its launcher (Deno itself).
  const permissions = SERVER_PERMISSIONS.map((flag) =>
    flag === "--allow-run" ? "--allow-run=/bin/sh,/usr/bin/true" : flag
  );
  const workspace = await Deno.makeTempDir({ dir: "/var/tmp", prefix: "no-layer-" });
  try {
    await using server = await startStdio({
      permissions,
      args: ["--sandbox-layer", "landlock"],
    });
    await handshake(server.stdio);
    const response = await server.stdio.request(1, "process/start", {
      processId: "p",
      argv: ["/usr/bin/true"],
      cwd: `file://${workspace}`,
      env: { PATH: "/usr/bin:/bin" },
      tty: false,
      sandbox: sandboxValue([workspace], "restricted"),
    });
    const error = response.error as { code: number; message: string; data: unknown };
    assert.equal(error.code, -32603, JSON.stringify(response));
    assert.deepEqual(error.data, { kind: "sandboxUnavailable" });
    assert.match(error.message, /--sandbox-layer landlock does not work here/);
    assert.match(error.message, /may not run .*deno.* \(the layer's launcher\)/);
    const unsandboxed = await call(server.stdio, "process/start", {
      processId: "q",
      argv: ["/usr/bin/true"],
      cwd: `file://${workspace}`,
      env: { PATH: "/usr/bin:/bin" },
      tty: false,
    });
    assert.equal(unsandboxed.sandboxType, "none");
  } finally {
    await Deno.remove(workspace, { recursive: true });
  }
  const refused = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      ...permissions,
      MAIN_TS,
      "--sandbox",
      "read-only",
      "--sandbox-layer",
      "landlock",
    ],
    stdin: "null",
  }).output();
  assert.equal(refused.code, 1);
  assert.match(new TextDecoder().decode(refused.stderr), /--sandbox read-only cannot be enforced/);
});

Deno.test("docs/guide/sandbox.md: its spawn-cost command runs and prints a row per layer that works here, and its layer table names every layer", async () => {
  const block = docBlock("sandbox-spawn-cost").trim();
  const [program, ...args] = block.split(/\s+/);
  assert.equal(program, "deno");
  const output = await new Deno.Command(Deno.execPath(), {
    args,
    cwd: new URL("..", import.meta.url).pathname,
    stdin: "null",
  }).output();
  assert.equal(output.code, 0, new TextDecoder().decode(output.stderr));
  const rows = new TextDecoder().decode(output.stdout).split("\n")
    .filter((line) => /^\| [a-z]/.test(line)).map((line) => line.split("|")[1]!.trim());
  assert.deepEqual(rows, [
    "layer",
    "none (direct spawn)",
    ...TEST_LAYERS.filter((t) => t.availability.ok).map((t) => t.layer),
  ]);
  const guide = await Deno.readTextFile(new URL("../docs/guide/sandbox.md", import.meta.url));
  for (const t of TEST_LAYERS) assert.match(guide, new RegExp(`^\\| \`${t.layer}\` +\\|`, "m"));
});

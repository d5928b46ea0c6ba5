/**
 * Sandboxed commands inside unprivileged podman containers (issue 33): the
 * server runs in a container as a non-root user, with a read-only root and
 * a seccomp profile, and confines its commands there.
 *
 * - Podman's default seccomp profile: user namespaces work but the kernel
 *   refuses bubblewrap a fresh `/proc` (`Can't mount proc on /newroot/proc`),
 *   so the server picks `bubblewrap-no-proc`.
 * - A copy of podman's default profile that denies user namespaces as
 *   Docker's does (no `unshare`, `clone` without namespace flags only,
 *   `clone3` answering `ENOSYS`): the server picks `landlock`.
 *
 * The containers are tests/helpers/podman_scene.ts's (the host's `/usr` and
 * `/etc`, no image built; stdio through `podman run -i`, no network). Containers are named `es-sandbox-*` and removed
 * at the end. Without podman (or as a non-root user, who cannot make the
 * containers here) the tests are ignored, saying why.
 *
 * @module
 */

import assert from "node:assert/strict";
import { handshake, type Json, ServerProcess } from "./helpers/server_harness.ts";
import { PYTHON3, sandboxValue } from "./helpers/attack.ts";
import {
  denyUserNamespaces,
  exists,
  makeScene,
  PODMAN_ENV,
  PODMAN_SKIP as SKIP,
  type Scene,
} from "./helpers/podman_scene.ts";

/** Runs `script` in the server's sandbox and returns its stdout, stderr and start result. */
async function run(
  server: ServerProcess,
  processId: string,
  script: string,
  cwd: string,
  sandbox?: Json,
): Promise<{ stdout: string; stderr: string; start: Json }> {
  const client = server.stdio!;
  const response = await client.request(`start-${processId}`, "process/start", {
    processId,
    argv: ["/bin/sh", "-c", script],
    cwd: `file://${cwd}`,
    env: { PATH: "/usr/bin:/bin" },
    tty: false,
    ...(sandbox === undefined ? {} : { sandbox }),
  });
  if (response.error !== undefined) return { stdout: "", stderr: "", start: response };
  await client.log.processClosed(processId, 60_000);
  return {
    stdout: client.log.outputText(processId),
    stderr: client.log.outputText(processId, "stderr"),
    start: response,
  };
}

/** The `sandboxLayer` of each `process.start` the server logged (JSON log on stderr). */
async function layersLogged(server: ServerProcess): Promise<unknown[]> {
  await server.stop();
  return (await server.stderr).split("\n").filter((line) => line.startsWith("{"))
    .map((line) => JSON.parse(line)).filter((event) => event.event === "process.start")
    .map((event) => event.sandboxLayer);
}

const LOG = ["--log-level", "info", "--log-format", "json"];
const WRITES = (scene: Scene) =>
  [
    `echo in > ${scene.workspace}/sub/in.txt && echo SUB_OK`,
    `echo new > ${scene.workspace}/existing.txt && echo EXISTING_OK`,
    `echo out > ${scene.outside}/out.txt && echo OUTSIDE_OK || echo OUTSIDE_REFUSED`,
  ].join("; ");
const NETWORK = PYTHON3 === undefined
  ? "echo NET_SKIPPED"
  : `${PYTHON3} -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_STREAM)' 2>/dev/null && echo NET_OK || echo NET_REFUSED`;

Deno.test({
  name:
    `in a podman container with its default seccomp profile, --sandbox workspace-write confines commands with bubblewrap-no-proc, and a client's read-only sandbox refuses writes${SKIP}`,
  ignore: SKIP !== "",
  async fn() {
    await using scene = await makeScene({ prefix: "es-sandbox-" });
    const name = `es-sandbox-default-${crypto.randomUUID().slice(0, 8)}`;
    const [program, ...leading] = scene.podman(name, undefined);
    await using server = await ServerProcess.start({
      listen: "stdio",
      command: [program!, ...leading],
      args: ["--sandbox", "workspace-write", "--writable-root", scene.workspace, ...LOG],
      env: PODMAN_ENV,
    });
    await handshake(server.stdio!);
    const written = await run(server, "ww", `${WRITES(scene)}; ${NETWORK}`, scene.workspace);
    assert.match(written.stdout, /SUB_OK/, written.stderr);
    assert.match(written.stdout, /EXISTING_OK/, written.stderr);
    assert.match(written.stdout, /OUTSIDE_REFUSED/, written.stderr);
    assert.doesNotMatch(written.stdout, /NET_OK/, written.stdout);
    assert.equal(await Deno.readTextFile(`${scene.workspace}/sub/in.txt`), "in\n");
    assert.equal(exists(`${scene.outside}/out.txt`), false);
    const readOnly = sandboxValue([], "restricted");
    const refused = await run(
      server,
      "ro",
      `echo x > ${scene.workspace}/sub/ro.txt && echo RO_WROTE || echo RO_REFUSED`,
      scene.workspace,
      readOnly,
    );
    assert.match(refused.stdout, /RO_REFUSED/, refused.stderr);
    assert.equal(exists(`${scene.workspace}/sub/ro.txt`), false);
    assert.deepEqual(await layersLogged(server), ["bubblewrap-no-proc", "bubblewrap-no-proc"]);
  },
});

Deno.test({
  name:
    `in a podman container, a client's sandbox with a writable root the container's user cannot write (its root-owned /tmp, as Codex's workspace-write names it) runs its command: no cover is made for that root's missing .git${SKIP}`,
  ignore: SKIP !== "",
  async fn() {
    await using scene = await makeScene({ prefix: "es-sandbox-" });
    const name = `es-sandbox-tmp-${crypto.randomUUID().slice(0, 8)}`;
    const [program, ...leading] = scene.podman(name, undefined);
    await using server = await ServerProcess.start({
      listen: "stdio",
      command: [program!, ...leading],
      args: LOG,
      env: PODMAN_ENV,
    });
    await handshake(server.stdio!);
    // bubblewrap could not make the cover's mount point ("Can't mkdir /tmp/.git").
    const unwritable = await run(
      server,
      "tmp",
      `echo in > ${scene.workspace}/sub/tmp.txt && echo TMP_ROOT_OK`,
      scene.workspace,
      sandboxValue([scene.workspace, "/tmp"], "restricted"),
    );
    assert.match(unwritable.stdout, /TMP_ROOT_OK/, unwritable.stderr);
    assert.deepEqual(await layersLogged(server), ["bubblewrap-no-proc"]);
  },
});

Deno.test({
  name:
    `in a podman container whose seccomp profile denies user namespaces, --sandbox workspace-write --writable-root confines commands with Landlock, and a forced layer that cannot work is refused with sandboxUnavailable${SKIP}`,
  ignore: SKIP !== "",
  async fn() {
    await using scene = await makeScene({ prefix: "es-sandbox-" });
    const profile = denyUserNamespaces(`${scene.base}/seccomp.json`);
    const name = `es-sandbox-nouserns-${crypto.randomUUID().slice(0, 8)}`;
    const [program, ...leading] = scene.podman(name, profile);
    await using server = await ServerProcess.start({
      listen: "stdio",
      command: [program!, ...leading],
      args: ["--sandbox", "workspace-write", "--writable-root", scene.workspace, ...LOG],
      env: PODMAN_ENV,
    });
    await handshake(server.stdio!);
    const written = await run(server, "ll", `${WRITES(scene)}; ${NETWORK}`, scene.workspace);
    assert.deepEqual(written.start.result, { processId: "ll", sandboxType: "linuxSeccomp" });
    assert.match(written.stdout, /SUB_OK/, written.stderr);
    assert.match(written.stdout, /EXISTING_OK/, written.stderr);
    assert.match(written.stdout, /OUTSIDE_REFUSED/, written.stderr);
    assert.doesNotMatch(written.stdout, /NET_OK/, written.stdout);
    assert.equal(await Deno.readTextFile(`${scene.workspace}/existing.txt`), "new\n");
    assert.equal(exists(`${scene.outside}/out.txt`), false);
    assert.deepEqual(await layersLogged(server), ["landlock"]);

    // bubblewrap forced where it cannot work, without a ceiling: a sandboxed start is refused.
    const forced = `es-sandbox-forced-${crypto.randomUUID().slice(0, 8)}`;
    const [forcedProgram, ...forcedLeading] = scene.podman(forced, profile);
    await using other = await ServerProcess.start({
      listen: "stdio",
      command: [forcedProgram!, ...forcedLeading],
      args: ["--sandbox-layer", "bubblewrap"],
      env: PODMAN_ENV,
    });
    await handshake(other.stdio!);
    const refused = await run(
      other,
      "refused",
      "echo RAN",
      scene.workspace,
      sandboxValue([scene.workspace], "restricted"),
    );
    const error = refused.start.error as { code: number; message: string; data: unknown };
    assert.equal(error?.code, -32603, JSON.stringify(refused.start));
    assert.deepEqual(error.data, { kind: "sandboxUnavailable" });
    assert.match(error.message, /--sandbox-layer bubblewrap does not work here: .*bwrap/);
  },
});

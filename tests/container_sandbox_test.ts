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
 * The container's root is a directory holding the host's `/usr` and `/etc`
 * (read-only volumes: Deno, bubblewrap and a shell come from the host), the
 * repository read-only at `/src` and Deno's cache read-only, so no image is
 * built. The workspace and a writable "outside" volume are host directories
 * mounted at the same paths. The server speaks stdio through `podman run -i`
 * and the container has no network (`--network none`: the network checks
 * are about the sandbox's seccomp filter, which refuses the socket before
 * any route matters). Containers are named `es-sandbox-*` and removed
 * at the end. Without podman (or as a non-root user, who cannot make the
 * containers here) the tests are ignored, saying why.
 *
 * @module
 */

import assert from "node:assert/strict";
import { handshake, type Json, ServerProcess } from "./helpers/server_harness.ts";
import { PYTHON3, sandboxValue } from "./helpers/attack.ts";
import { DEFAULT_SECCOMP_PROFILE, denyUserNamespaces } from "./helpers/seccomp.ts";

const PODMAN = ["/usr/bin/podman", "/usr/local/bin/podman"].find((path) => {
  try {
    return Deno.statSync(path).isFile;
  } catch {
    return false;
  }
});
const DENO_CACHE = Deno.env.get("DENO_DIR") ??
  `${Deno.env.get("XDG_CACHE_HOME") ?? `${Deno.env.get("HOME")}/.cache`}/deno`;
const REPO = new URL("..", import.meta.url).pathname.replace(/\/$/, "");
const USER = "65534:65534";
/** Podman's own environment. */
const PODMAN_ENV = { PATH: "/usr/sbin:/usr/bin:/sbin:/bin", HOME: Deno.env.get("HOME") ?? "/root" };

const SKIP = PODMAN === undefined
  ? " (ignored: podman is not installed)"
  : Deno.uid() !== 0
  ? " (ignored: these containers are made as root here)"
  : !exists(DEFAULT_SECCOMP_PROFILE)
  ? ` (ignored: no ${DEFAULT_SECCOMP_PROFILE} to copy)`
  : !exists(DENO_CACHE)
  ? ` (ignored: no Deno cache at ${DENO_CACHE})`
  : "";

function exists(path: string): boolean {
  try {
    Deno.statSync(path);
    return true;
  } catch {
    return false;
  }
}

/** The container's root, a workspace and an outside volume, under /var/tmp. */
interface Scene extends AsyncDisposable {
  base: string;
  workspace: string;
  outside: string;
  /** Podman's arguments before the command. */
  podman(name: string, seccomp: string | undefined): string[];
}

async function makeScene(): Promise<Scene> {
  const base = await Deno.realPath(
    await Deno.makeTempDir({ dir: "/var/tmp", prefix: "es-sandbox-" }),
  );
  const root = `${base}/root`;
  const workspace = `${base}/workspace`;
  const outside = `${base}/outside`;
  for (const dir of ["usr", "etc", "proc", "sys", "dev", "tmp", "src", "deno"]) {
    await Deno.mkdir(`${root}/${dir}`, { recursive: true });
  }
  for (const link of ["bin", "lib", "lib64", "sbin"]) {
    if (exists(`/usr/${link}`)) await Deno.symlink(`usr/${link}`, `${root}/${link}`);
  }
  for (const dir of [workspace, `${workspace}/sub`, outside]) {
    await Deno.mkdir(dir, { recursive: true });
    await Deno.mkdir(`${root}${dir}`, { recursive: true });
    await Deno.chown(dir, 65534, 65534);
  }
  await Deno.writeTextFile(`${workspace}/existing.txt`, "old\n");
  await Deno.chown(`${workspace}/existing.txt`, 65534, 65534);
  const names: string[] = [];
  return {
    base,
    workspace,
    outside,
    podman(name, seccomp) {
      names.push(name);
      return [
        PODMAN!,
        "--runtime",
        "runc",
        "run",
        "-i",
        "--rm",
        "--name",
        name,
        "--read-only",
        "--network",
        "none",
        "--user",
        USER,
        "--ulimit",
        "nofile=4096:4096",
        "--ulimit",
        "nproc=4096:4096",
        ...(seccomp === undefined ? [] : ["--security-opt", `seccomp=${seccomp}`]),
        ...["-v", "/usr:/usr:ro", "-v", "/etc:/etc:ro", "-v", `${REPO}:/src:ro`],
        ...["-v", `${DENO_CACHE}:/deno:ro`, "-v", `${workspace}:${workspace}`],
        ...["-v", `${outside}:${outside}`],
        ...["-e", "HOME=/tmp", "-e", "DENO_DIR=/deno", "-e", "PATH=/usr/bin:/bin"],
        "--rootfs",
        root,
        "deno",
        "run",
        "-A",
        "--cached-only",
        "/src/main.ts",
      ];
    },
    async [Symbol.asyncDispose]() {
      for (const name of names) {
        await new Deno.Command(PODMAN!, {
          args: ["rm", "-f", "--ignore", name],
          stdout: "null",
          stderr: "null",
        }).output();
      }
      await Deno.remove(base, { recursive: true }).catch(() => {});
    },
  };
}

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
    await using scene = await makeScene();
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
    `in a podman container whose seccomp profile denies user namespaces, --sandbox workspace-write --writable-root confines commands with Landlock, and a forced layer that cannot work is refused with sandboxUnavailable${SKIP}`,
  ignore: SKIP !== "",
  async fn() {
    await using scene = await makeScene();
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

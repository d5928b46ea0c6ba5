/**
 * Unprivileged podman containers that run this repository's server, for
 * the container sandbox tests (issue 33): a non-root user, a read-only
 * root, podman's default seccomp profile or a copy denying user namespaces
 * as Docker's does.
 *
 * The container's root is a directory holding the host's `/usr` and `/etc`
 * (read-only volumes: Deno, bubblewrap, a shell and Python come from the
 * host), the repository read-only at `/src` and Deno's cache read-only at
 * `/deno`, so no image is built. The workspace and a writable "outside"
 * volume are host directories mounted at the same paths, so that a client
 * on the host (Codex) names them as the server sees them. The server speaks
 * stdio through `podman run -i`; the container has no network (`--network
 * none`: the network checks are about the sandbox's seccomp filter, which
 * refuses the socket before any route matters).
 *
 * @module
 */

import { runnerDenoDir } from "./server_harness.ts";

/** The podman binary, or `undefined` when none is installed. */
export const PODMAN: string | undefined = ["/usr/bin/podman", "/usr/local/bin/podman"].find(
  (path) => {
    try {
      return Deno.statSync(path).isFile;
    } catch {
      return false;
    }
  },
);
const DENO_CACHE = runnerDenoDir();
const DEFAULT_PROFILE = "/usr/share/containers/seccomp.json";
const REPO = decodeURIComponent(new URL("../..", import.meta.url).pathname).replace(/\/$/, "");
/** The container's user and group (`nobody`), who owns the workspace and the outside volume. */
const NOBODY = 65534;
/** Podman's own environment. */
export const PODMAN_ENV: Record<string, string> = {
  PATH: "/usr/sbin:/usr/bin:/sbin:/bin",
  HOME: Deno.env.get("HOME") ?? "/root",
};

/**
 * `""`, or ` (ignored: <why>)` for test names when these containers cannot
 * be made here (no podman, not root, no default seccomp profile, no Deno cache).
 */
export const PODMAN_SKIP: string = PODMAN === undefined
  ? " (ignored: podman is not installed)"
  : Deno.uid() !== 0
  ? " (ignored: these containers are made as root here)"
  : !exists(DEFAULT_PROFILE)
  ? ` (ignored: no ${DEFAULT_PROFILE} to copy)`
  : !exists(DENO_CACHE)
  ? ` (ignored: no Deno cache at ${DENO_CACHE})`
  : "";

/**
 * Tells whether `path` exists (for assertions on what a sandboxed command
 * left behind).
 *
 * @param path Any path.
 * @returns True when `stat` finds it.
 */
export function exists(path: string): boolean {
  try {
    Deno.statSync(path);
    return true;
  } catch {
    return false;
  }
}

/**
 * Writes podman's default seccomp profile, changed to deny user namespaces
 * as Docker's default does: no `unshare`, `clone` only without namespace
 * flags, `clone3` answering `ENOSYS`.
 *
 * @param profile Where to write it.
 * @returns `profile`.
 */
export function denyUserNamespaces(profile: string): string {
  const json = JSON.parse(Deno.readTextFileSync(DEFAULT_PROFILE)) as {
    syscalls: { names: string[]; action: string }[];
  };
  for (const rule of json.syscalls) {
    if (rule.action === "SCMP_ACT_ALLOW") {
      rule.names = rule.names.filter((name) => !["unshare", "clone", "clone3"].includes(name));
    }
  }
  // CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET: none may be set.
  json.syscalls.push({
    names: ["clone"],
    action: "SCMP_ACT_ALLOW",
    args: [{ index: 0, value: 0x7e020000, valueTwo: 0, op: "SCMP_CMP_MASKED_EQ" }],
  } as never);
  json.syscalls.push({ names: ["clone3"], action: "SCMP_ACT_ERRNO", errnoRet: 38 } as never);
  Deno.writeTextFileSync(profile, JSON.stringify(json));
  return profile;
}

/** Options for {@linkcode makeScene}. */
export interface SceneOptions {
  /**
   * Where the scene's directory goes (it must not be under /tmp for Codex).
   * @default {"/var/tmp"}
   */
  dir?: string;
  /** The scene directory's name prefix, e.g. the tests' container prefix. */
  prefix: string;
}

/** The container's root, a workspace and an outside volume. */
export interface Scene extends AsyncDisposable {
  /** The scene's directory (removed at the end). */
  base: string;
  /** A writable volume, owned by the container's user, with `sub/` and `existing.txt`. */
  workspace: string;
  /** Another writable volume, owned by the container's user, outside the workspace. */
  outside: string;
  /**
   * Podman's command line up to the server's own flags (`deno run … /src/main.ts`).
   * Each container is removed when the scene is disposed.
   *
   * @param name The container's name.
   * @param seccomp A seccomp profile, or `undefined` for podman's default.
   */
  podman(name: string, seccomp: string | undefined): string[];
}

/**
 * Makes a scene: the container's root directory, the workspace and the outside volume.
 *
 * @param options Where and under which prefix.
 * @returns The scene; dispose it to remove its containers and directory.
 */
export async function makeScene(options: SceneOptions): Promise<Scene> {
  const base = await Deno.realPath(
    await Deno.makeTempDir({ dir: options.dir ?? "/var/tmp", prefix: options.prefix }),
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
    await Deno.chown(dir, NOBODY, NOBODY);
  }
  await Deno.writeTextFile(`${workspace}/existing.txt`, "old\n");
  await Deno.chown(`${workspace}/existing.txt`, NOBODY, NOBODY);
  const names: string[] = [];
  return {
    base,
    workspace,
    outside,
    podman(name, seccomp) {
      names.push(name);
      return [
        PODMAN!,
        ...["--runtime", "runc", "run", "-i", "--rm", "--name", name, "--read-only"],
        ...["--network", "none", "--user", `${NOBODY}:${NOBODY}`],
        ...["--ulimit", "nofile=4096:4096", "--ulimit", "nproc=4096:4096"],
        ...(seccomp === undefined ? [] : ["--security-opt", `seccomp=${seccomp}`]),
        ...["-v", "/usr:/usr:ro", "-v", "/etc:/etc:ro", "-v", `${REPO}:/src:ro`],
        ...["-v", `${DENO_CACHE}:/deno:ro`, "-v", `${workspace}:${workspace}`],
        ...["-v", `${outside}:${outside}`],
        ...["-e", "HOME=/tmp", "-e", "DENO_DIR=/deno", "-e", "PATH=/usr/bin:/bin"],
        ...["--rootfs", root, "deno", "run", "-A", "--cached-only", "/src/main.ts"],
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

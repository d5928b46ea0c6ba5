/**
 * Sandboxed processes on Linux with bubblewrap (docs/protocol.md section 13, sandboxing).
 *
 * A `process/start` with a `sandbox` runs its command under `bwrap`, the way
 * the reference's Linux sandbox does:
 *
 * - the file system is the host's, read-only, with the policy's writable
 *   roots bound read-write and its read-only and denied paths layered on top
 *   (see {@linkcode planSandbox}); `/dev` is a minimal device tree, `/proc` a
 *   fresh one whose `sys` and `sysrq-trigger` stay read-only (or, where the
 *   kernel refuses to mount one, the host's, read-only: {@linkcode NO_PROC_FLAGS});
 * - its own user (all capabilities dropped), mount, PID and IPC namespaces,
 *   and with network `restricted` its own network namespace (loopback only)
 *   plus a seccomp filter that fails socket calls with `EPERM`
 *   ({@linkcode seccompProgram});
 * - `--die-with-parent`: the sandbox dies with the server.
 *
 * bubblewrap reads the seccomp filter from a file descriptor, and neither
 * spawn path of the server can pass one, so the command line starts with
 * `/bin/sh -c 'exec "$@" 3<"$0"' <filter file> bwrap ...`: the shell opens the
 * filter as descriptor 3 and replaces itself with `bwrap` (same pid, so
 * process groups, signals and `process/terminate` work as without a
 * sandbox). Variables the shell drops (names it rejects, such as
 * `BASH_FUNC_f%%`) are put back with `bwrap --setenv`; `PWD` is the working
 * directory, as bubblewrap sets it (so does the reference's).
 *
 * No `--new-session`: a tty process keeps its pseudo-terminal as controlling
 * terminal (job control and Ctrl-C work); the terminal belongs to the
 * sandboxed process alone, so `TIOCSTI` cannot reach anything outside.
 * `interrupt` (SIGINT to the process group) also ends `bwrap`, which takes
 * the whole sandbox down, like the reference.
 *
 * @module
 */

import { statOrNull } from "../host/stat.ts";
import { accessAt, type SandboxPlan } from "./policy.ts";
import { PRIVATE_TMP_BYTES } from "./server_policy.ts";

/**
 * The shell snippet that opens the filter (`$0`) as fd 3, `/dev/null` as fd 4 (the empty
 * content `--ro-bind-data` puts over denied files) and executes the rest.
 */
export const SECCOMP_SHIM = 'exec "$@" 3<"$0" 4</dev/null';

/** The shell that runs {@linkcode SECCOMP_SHIM}. */
export const SHIM_SHELL = "/bin/sh";

/** Flags every sandbox gets. */
export const COMMON_FLAGS = ["--die-with-parent", "--unshare-user", "--cap-drop", "ALL"];

/**
 * What replaces `--proc /proc` where the kernel refuses a fresh `/proc` (layer
 * `bubblewrap-no-proc`): this host's `/proc`, bound read-only. The sandbox
 * then sees the host's processes (as the reference's does there) but cannot
 * write to any of `/proc`; its own processes still live in their own PID
 * namespace, and `/proc/self` names them.
 */
export const NO_PROC_FLAGS: readonly string[] = ["--ro-bind", "/proc", "/proc"];

/** Options for {@linkcode bwrapArgs}. */
export interface BwrapArgsOptions {
  /**
   * Mount a fresh `/proc` (layer `bubblewrap`); `false` binds the host's
   * read-only instead ({@linkcode NO_PROC_FLAGS}, layer `bubblewrap-no-proc`).
   *
   * @default {true}
   */
  proc?: boolean;
  /** Working directory of the command (native absolute path). */
  cwd: string;
  /** The command's complete environment. */
  env: Record<string, string>;
  /** What the command sees as `argv[0]` (needs bubblewrap's `--argv0`). */
  arg0?: string | null;
  /** Directory holding the seccomp filter files, kept read-only inside. */
  filterDirectory?: string;
  /**
   * An empty file with mode `0000`, bound read-only over denied files
   * (reads fail with `EACCES`, writes with `EROFS`, as the reference).
   *
   * @default {a fresh such file from fd 4 (`--perms 0000 --ro-bind-data 4`)}
   */
  deniedFile?: string;
}

const SHELL_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * Builds bubblewrap's arguments (everything after `bwrap`) for a plan: the
 * namespaces, the mounts in order, the seccomp filter on fd 3, the working
 * directory, the environment fix-ups, then `--` and the command.
 *
 * @param plan A plan whose isolation is not `"none"`.
 * @param argv The command; `argv[0]` is looked up on the environment's `PATH` inside.
 * @param options Working directory, environment, `arg0`, filter directory.
 */
export function bwrapArgs(plan: SandboxPlan, argv: string[], options: BwrapArgsOptions): string[] {
  const args = [...COMMON_FLAGS];
  if (plan.network === "restricted") args.push("--unshare-net");
  const remount: string[] = [];
  if (plan.isolation === "filesystem") {
    args.push("--unshare-pid", "--unshare-ipc");
    args.push(plan.rootAccess === "write" ? "--bind" : "--ro-bind", "/", "/", "--dev", "/dev");
    if (plan.privateTmp) args.push("--size", String(PRIVATE_TMP_BYTES), "--tmpfs", "/tmp");
    for (const mount of plan.mounts) {
      if (mount.node === "missing") {
        args.push("--perms", mount.access === "deny" ? "0000" : "0555", "--tmpfs", mount.path);
        remount.push(mount.path);
      } else if (mount.access === "write") {
        args.push("--bind", mount.path, mount.path);
      } else if (mount.access === "read") {
        args.push("--ro-bind", mount.path, mount.path);
      } else if (mount.node === "directory") {
        args.push("--perms", mount.traversable ? "0111" : "0000", "--tmpfs", mount.path);
        remount.push(mount.path);
      } else {
        // An empty, mode-0000, read-only file: reads fail with EACCES, writes with EROFS.
        if (options.deniedFile !== undefined) {
          args.push("--ro-bind", options.deniedFile, mount.path);
        } else args.push("--perms", "0000", "--ro-bind-data", "4", mount.path);
      }
    }
  } else {
    args.push("--dev-bind", "/", "/");
  }
  const filters = options.filterDirectory;
  if (filters !== undefined && accessAt(plan, filters) === "write") {
    args.push("--ro-bind", filters, filters);
  }
  if (plan.isolation === "filesystem" && options.proc === false) {
    args.push(...NO_PROC_FLAGS);
  } else if (plan.isolation === "filesystem") {
    args.push("--proc", "/proc", "--ro-bind", "/proc/sys", "/proc/sys");
    args.push("--ro-bind-try", "/proc/sysrq-trigger", "/proc/sysrq-trigger");
  }
  if (plan.isolation === "filesystem") {
    for (const path of remount.reverse()) args.push("--remount-ro", path);
  }
  args.push("--seccomp", "3");
  if (statOrNull(options.cwd)?.isDirectory) args.push("--chdir", options.cwd);
  if (options.arg0 !== undefined && options.arg0 !== null && options.arg0 !== argv[0]) {
    args.push("--argv0", options.arg0);
  }
  // Put back the variables the shim shell drops (names it cannot use).
  // `PWD` needs no care: bubblewrap sets it to the working directory.
  for (const [name, value] of Object.entries(options.env)) {
    if (name !== "" && !SHELL_NAME.test(name)) args.push("--setenv", name, value);
  }
  args.push("--", ...argv);
  return args;
}

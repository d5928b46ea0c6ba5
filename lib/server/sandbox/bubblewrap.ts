/**
 * Sandboxed processes on Linux with bubblewrap (SPEC §13, sandboxing).
 *
 * A `process/start` with a `sandbox` runs its command under `bwrap`, the way
 * the reference's Linux sandbox does:
 *
 * - the file system is the host's, read-only, with the policy's writable
 *   roots bound read-write and its read-only and denied paths layered on top
 *   (see {@linkcode planSandbox}); `/dev` is a minimal device tree, `/proc` a
 *   fresh one whose `sys` and `sysrq-trigger` stay read-only;
 * - its own user (all capabilities dropped), mount, PID and IPC namespaces,
 *   and with network `restricted` its own network namespace (loopback only)
 *   plus a seccomp filter that fails socket calls with `EPERM`
 *   ({@linkcode seccompProgram});
 * - `--die-with-parent`: the sandbox dies with the server.
 *
 * bubblewrap reads the seccomp filter from a file descriptor, and neither
 * spawn path of the server can pass one, so the command line starts with
 * `/bin/sh -c 'exec "$@" 3<"$0"' <filter file> bwrap …`: the shell opens the
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

import { ErrorCode, invalidParams, RpcError } from "../../protocol/errors.ts";
import {
  accessAt,
  acquireSyntheticMountPoints,
  releaseSyntheticMountPoints,
  type SandboxPlan,
} from "./policy.ts";
import { seccompArch, type SeccompMode, seccompProgram } from "./seccomp.ts";
import { PRIVATE_TMP_BYTES } from "./server_policy.ts";

export {
  accessAt,
  canonicalPath,
  type NetworkPolicy,
  planSandbox,
  type PlanSandboxOptions,
  PROTECTED_NAMES,
  type SandboxAccess,
  type SandboxIsolation,
  type SandboxMount,
  type SandboxPlan,
} from "./policy.ts";
export { seccompProgram } from "./seccomp.ts";
export type { SeccompArch, SeccompMode } from "./seccomp.ts";

/** The shell snippet that opens the filter (`$0`) as fd 3 and executes the rest. */
export const SECCOMP_SHIM = 'exec "$@" 3<"$0"';

/** The shell that runs {@linkcode SECCOMP_SHIM}. */
export const SHIM_SHELL = "/bin/sh";

/** Whether sandboxed processes can run here, and why not. */
export type SandboxAvailability =
  | {
    /** bubblewrap works. */
    ok: true;
    /** Absolute path of `bwrap`. */
    bwrap: string;
    /** Its version, e.g. `"0.8.0"`. */
    version: string;
    /** It has `--argv0` (0.9 and later), needed for `arg0` in a sandbox. */
    argv0: boolean;
  }
  | {
    /** Sandboxed requests fail. */
    ok: false;
    /** The cause, e.g. `bubblewrap (bwrap) is not installed: …`. */
    reason: string;
  };

let probed: SandboxAvailability | undefined;
let filterDirectory: string | undefined;

function envGet(name: string): string | undefined {
  try {
    return Deno.env.get(name);
  } catch {
    return undefined;
  }
}

function isFile(path: string): boolean {
  try {
    return Deno.statSync(path).isFile;
  } catch {
    return false;
  }
}

function findBwrap(): string | undefined {
  const dirs = (envGet("PATH") ?? "").split(":").filter((dir) => dir.startsWith("/"));
  for (const dir of [...dirs, "/usr/bin", "/usr/local/bin", "/bin"]) {
    const candidate = `${dir}/bwrap`;
    if (isFile(candidate)) return candidate;
  }
  return undefined;
}

function mayRun(command: string): boolean {
  try {
    return Deno.permissions.querySync({ name: "run", command }).state === "granted";
  } catch {
    return false;
  }
}

/** Writes (or checks) the filter file of a mode and returns its path. */
function filterFile(mode: SeccompMode): string {
  const arch = seccompArch();
  if (arch === undefined) throw new Error(`No seccomp filter for ${Deno.build.arch}`);
  const program = seccompProgram(mode, arch);
  if (filterDirectory === undefined) {
    filterDirectory = Deno.makeTempDirSync({ prefix: "exec-server-seccomp-" });
    const directory = filterDirectory;
    globalThis.addEventListener("unload", () => {
      try {
        Deno.removeSync(directory, { recursive: true });
      } catch {
        // Best effort.
      }
    });
  }
  const denied = `${filterDirectory}/denied`;
  try {
    const info = Deno.lstatSync(denied);
    if (!info.isFile || info.size !== 0 || (info.mode ?? 0) & 0o777) throw new Error("changed");
  } catch {
    const temp = `${denied}.${crypto.randomUUID()}`;
    Deno.writeFileSync(temp, new Uint8Array(), { mode: 0o000 });
    Deno.chmodSync(temp, 0o000);
    Deno.renameSync(temp, denied);
  }
  const path = `${filterDirectory}/${mode}.bpf`;
  let current: Uint8Array | undefined;
  try {
    current = Deno.readFileSync(path);
  } catch {
    current = undefined;
  }
  if (current === undefined || !sameBytes(current, program)) {
    const temp = `${path}.${crypto.randomUUID()}`;
    Deno.writeFileSync(temp, program, { mode: 0o444 });
    Deno.renameSync(temp, path);
  }
  return path;
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((byte, i) => byte === b[i]);
}

function firstLine(text: string): string {
  return text.trim().split("\n")[0]?.trim() ?? "";
}

/** Options for {@linkcode probeSandbox}. */
export interface ProbeSandboxOptions {
  /**
   * The `bwrap` to try.
   *
   * @default {the first `bwrap` on the server's `PATH`, else in `/usr/bin`}
   */
  bwrap?: string;
}

/**
 * Checks, without caching, whether sandboxed processes can run; see
 * {@linkcode sandboxAvailable}.
 *
 * @param options Which `bwrap` to try.
 */
export function probeSandbox(options: ProbeSandboxOptions = {}): SandboxAvailability {
  const trial = prepareTrial(options);
  if ("reason" in trial) return trial;
  try {
    const version = trial.version.outputSync();
    const run = trial.run.outputSync();
    return judgeTrial(trial.bwrap, version, run);
  } catch (err) {
    return { ok: false, reason: `cannot run bubblewrap: ${(err as Error).message}` };
  }
}

/**
 * {@linkcode probeSandbox} without blocking the event loop.
 *
 * @param options Which `bwrap` to try.
 */
export async function probeSandboxAsync(
  options: ProbeSandboxOptions = {},
): Promise<SandboxAvailability> {
  const trial = prepareTrial(options);
  if ("reason" in trial) return trial;
  try {
    const [version, run] = await Promise.all([trial.version.output(), trial.run.output()]);
    return judgeTrial(trial.bwrap, version, run);
  } catch (err) {
    return { ok: false, reason: `cannot run bubblewrap: ${(err as Error).message}` };
  }
}

/** The cheap checks (no process started); `undefined` when they pass. */
function staticCheck(bwrap: string | undefined): { ok: false; reason: string } | undefined {
  if (Deno.build.os !== "linux") {
    return {
      ok: false,
      reason: `sandboxing needs Linux and bubblewrap (this is ${Deno.build.os})`,
    };
  }
  if (seccompArch() === undefined) {
    return { ok: false, reason: `the seccomp filter does not support ${Deno.build.arch}` };
  }
  if (bwrap === undefined || !isFile(bwrap)) {
    return {
      ok: false,
      reason: "bubblewrap (bwrap) is not installed: install the bubblewrap package",
    };
  }
  if (!isFile(SHIM_SHELL)) return { ok: false, reason: `${SHIM_SHELL} does not exist` };
  for (const command of [bwrap, SHIM_SHELL]) {
    if (!mayRun(command)) {
      return { ok: false, reason: `the server may not run ${command}: start it with --allow-run` };
    }
  }
  return undefined;
}

/** The two commands of a probe: `bwrap --version` and a trial sandbox with a real one's flags. */
function prepareTrial(
  options: ProbeSandboxOptions,
): { bwrap: string; version: Deno.Command; run: Deno.Command } | { ok: false; reason: string } {
  const bwrap = options.bwrap ?? findBwrap();
  const problem = staticCheck(bwrap);
  if (problem !== undefined) return problem;
  let filter: string;
  try {
    filter = filterFile("restricted");
  } catch (err) {
    return { ok: false, reason: `cannot write the seccomp filter: ${(err as Error).message}` };
  }
  const flags = [
    ...COMMON_FLAGS,
    ...["--unshare-net", "--unshare-pid", "--unshare-ipc", "--ro-bind", "/", "/"],
    ...["--dev", "/dev", "--proc", "/proc", "--ro-bind", "/proc/sys", "/proc/sys"],
    ...["--seccomp", "3", "--", SHIM_SHELL, "-c", "exit 0"],
  ];
  return {
    bwrap: bwrap!,
    version: new Deno.Command(bwrap!, { args: ["--version"], stdin: "null", stderr: "null" }),
    run: new Deno.Command(SHIM_SHELL, {
      args: ["-c", SECCOMP_SHIM, filter, bwrap!, ...flags],
      stdin: "null",
      stdout: "null",
      stderr: "piped",
      clearEnv: true,
      env: { PATH: "/usr/bin:/bin" },
    }),
  };
}

function judgeTrial(
  bwrap: string,
  versionOutput: Deno.CommandOutput,
  run: Deno.CommandOutput,
): SandboxAvailability {
  if (!run.success) {
    const detail = firstLine(new TextDecoder().decode(run.stderr)) || `exit code ${run.code}`;
    return {
      ok: false,
      reason: `bubblewrap cannot create a sandbox here (are user namespaces enabled?): ${detail}`,
    };
  }
  const version = firstLine(new TextDecoder().decode(versionOutput.stdout))
    .replace(/^bubblewrap\s+/, "");
  const [major = 0, minor = 0] = version.split(".").map(Number);
  // bubblewrap 0.9.0 added --argv0.
  const argv0 = major > 0 || minor >= 9;
  return { ok: true, bwrap, version, argv0 };
}

/**
 * Checks once (then caches) that sandboxed processes can run: Linux, a
 * supported architecture, `bwrap` on `PATH` (or in `/usr/bin`), permission to
 * run it and `/bin/sh`, and a trial sandbox with the flags a real one uses
 * (user namespaces must be available). The first call costs about 30 ms;
 * {@linkcode warmSandboxProbe} runs it in the background instead.
 *
 * @returns `{ok: true, …}` or `{ok: false, reason}` naming the cause.
 */
export function sandboxAvailable(): SandboxAvailability {
  probed ??= probeSandbox();
  return probed;
}

let warming: Promise<SandboxAvailability> | undefined;

/**
 * Starts the probe of {@linkcode sandboxAvailable} in the background (for
 * example at server start), so neither `initialize` nor the first sandboxed
 * `process/start` waits for it.
 *
 * @returns The result, also cached for {@linkcode sandboxAvailable}.
 */
export function warmSandboxProbe(): Promise<SandboxAvailability> {
  if (probed !== undefined) return Promise.resolve(probed);
  warming ??= probeSandboxAsync().then((result) => (probed ??= result));
  return warming;
}

/**
 * The capability flag for `environmentInfo`: the probe's result once it has
 * run, else the cheap checks only (Linux, architecture, `bwrap` installed and
 * runnable), so `initialize` never waits for a trial sandbox.
 */
export function sandboxCapability(): boolean {
  if (probed !== undefined) return probed.ok;
  return staticCheck(findBwrap()) === undefined;
}

/** Flags every sandbox gets. */
const COMMON_FLAGS = ["--die-with-parent", "--unshare-user", "--cap-drop", "ALL"];

/** Options for {@linkcode bwrapArgs} and {@linkcode launchSandboxed}. */
export interface SandboxLaunchOptions {
  /** Working directory of the command (native absolute path). */
  cwd: string;
  /** The command's complete environment. */
  env: Record<string, string>;
  /** What the command sees as `argv[0]` (needs bubblewrap's `--argv0`). */
  arg0?: string | null;
  /**
   * Whether bubblewrap works.
   *
   * @default {sandboxAvailable()}
   */
  availability?: SandboxAvailability;
}

/** Options for {@linkcode bwrapArgs}. */
export interface BwrapArgsOptions extends SandboxLaunchOptions {
  /** Directory holding the seccomp filter files, kept read-only inside. */
  filterDirectory?: string;
  /**
   * An empty file with mode `0000`, bound read-only over denied files
   * (reads fail with `EACCES`, writes with `EROFS`, as the reference).
   *
   * @default {"/dev/null" (both fail with `EACCES`)}
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
        args.push("--perms", "0000", "--tmpfs", mount.path);
        remount.push(mount.path);
      } else {
        args.push("--ro-bind", options.deniedFile ?? "/dev/null", mount.path);
      }
    }
  } else {
    args.push("--dev-bind", "/", "/");
  }
  const filters = options.filterDirectory;
  if (filters !== undefined && accessAt(plan, filters) === "write") {
    args.push("--ro-bind", filters, filters);
  }
  if (plan.isolation === "filesystem") {
    args.push("--proc", "/proc", "--ro-bind", "/proc/sys", "/proc/sys");
    args.push("--ro-bind-try", "/proc/sysrq-trigger", "/proc/sysrq-trigger");
    for (const path of remount.reverse()) args.push("--remount-ro", path);
  }
  args.push("--seccomp", "3");
  if (isDirectory(options.cwd)) args.push("--chdir", options.cwd);
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

function isDirectory(path: string): boolean {
  try {
    return Deno.statSync(path).isDirectory;
  } catch {
    return false;
  }
}

/** What to spawn for a sandboxed command. */
export interface SandboxLaunch {
  /**
   * `true` when {@linkcode argv} wraps the command in bubblewrap: spawn it
   * without `arg0` (the sandbox applies it). `false` when the plan restricts
   * nothing: spawn the command as usual.
   */
  readonly wrapped: boolean;
  /** The argv to spawn; `argv[0]` is an absolute path when wrapped. */
  readonly argv: string[];
  /** Removes what the sandbox left on the host (synthetic mount points); idempotent. */
  release(): void;
}

/**
 * Prepares a sandboxed spawn: the command line to run instead of `argv`.
 * Call {@linkcode SandboxLaunch.release} once the process has exited (or
 * failed to start).
 *
 * @param plan The request's plan.
 * @param argv The requested command.
 * @param options Working directory, environment, `arg0`.
 * @throws {RpcError} `-32603` (`data.kind: "spawnFailed"`) when sandboxing is
 * unavailable, naming the cause; `-32602` for an `arg0` this bubblewrap
 * cannot set.
 */
export function launchSandboxed(
  plan: SandboxPlan,
  argv: string[],
  options: SandboxLaunchOptions,
): SandboxLaunch {
  if (plan.isolation === "none") return { wrapped: false, argv: [...argv], release() {} };
  const availability = options.availability ?? sandboxAvailable();
  if (!availability.ok) {
    throw new RpcError(
      ErrorCode.InternalError,
      `cannot start a sandboxed process: ${availability.reason}`,
      { data: { kind: "spawnFailed" } },
    );
  }
  const arg0 = options.arg0;
  if (arg0 !== undefined && arg0 !== null && arg0 !== argv[0] && !availability.argv0) {
    throw invalidParams(
      `arg0 is not supported in a sandbox with bubblewrap ${availability.version} ` +
        "(it needs bubblewrap 0.9 or later for --argv0)",
    );
  }
  const filter = filterFile(plan.network === "restricted" ? "restricted" : "vsock");
  const synthetic = plan.isolation === "filesystem"
    ? plan.mounts.filter((mount) => mount.node === "missing").map((mount) => mount.path)
    : [];
  const args = bwrapArgs(plan, argv, {
    ...options,
    filterDirectory,
    deniedFile: `${filterDirectory}/denied`,
  });
  acquireSyntheticMountPoints(synthetic);
  let released = false;
  return {
    wrapped: true,
    argv: [SHIM_SHELL, "-c", SECCOMP_SHIM, filter, availability.bwrap, ...args],
    release() {
      if (released) return;
      released = true;
      releaseSyntheticMountPoints(synthetic);
    },
  };
}

/** How much of the end of a process's output {@linkcode looksSandboxDenied} reads (1 MiB). */
export const SANDBOX_DENIED_WINDOW_BYTES = 1024 * 1024;

/**
 * Words in the output that suggest the sandbox refused something (the
 * reference's list, plus `bwrap:` for bubblewrap's own failures).
 */
export const SANDBOX_DENIED_KEYWORDS: readonly string[] = [
  "operation not permitted",
  "permission denied",
  "read-only file system",
  "seccomp",
  "sandbox",
  "landlock",
  "failed to write file",
  "bwrap:",
];

/** Exit codes that never count as a denial without a keyword (usage error, not executable, not found). */
const QUICK_REJECT_EXIT_CODES = new Set([2, 126, 127]);
/** 128 + SIGSYS: killed by the seccomp filter. */
const SIGSYS_EXIT_CODE = 128 + 31;

/**
 * The heuristic behind `sandboxDenied` (the reference's): a sandboxed
 * command that failed (non-zero exit) was probably stopped by the sandbox
 * when the last {@linkcode SANDBOX_DENIED_WINDOW_BYTES} of its combined
 * output mention one of {@linkcode SANDBOX_DENIED_KEYWORDS}
 * (case-insensitive), or when it was killed by `SIGSYS` (exit code 159).
 * Exit codes 2, 126 and 127 without a keyword are not denials.
 *
 * @param exitCode The exit code reported on the wire.
 * @param output The end of stdout and stderr (or the pty stream), in order.
 *
 * @example Classify a failed write
 * ```ts
 * import { looksSandboxDenied } from "./bubblewrap.ts";
 * console.log(looksSandboxDenied(1, "bash: /etc/x: Read-only file system\n")); // true
 * console.log(looksSandboxDenied(3, "hello\n")); // false
 * ```
 */
export function looksSandboxDenied(exitCode: number, output: string): boolean {
  if (exitCode === 0) return false;
  const text = output.toLowerCase();
  if (SANDBOX_DENIED_KEYWORDS.some((keyword) => text.includes(keyword))) return true;
  if (QUICK_REJECT_EXIT_CODES.has(exitCode)) return false;
  return exitCode === SIGSYS_EXIT_CODE;
}

/**
 * The last bytes of a process's output, for {@linkcode looksSandboxDenied}.
 *
 * @example Keep the end of the output
 * ```ts
 * import { OutputTail } from "./bubblewrap.ts";
 * const tail = new OutputTail(4);
 * tail.push(new TextEncoder().encode("abcdef"));
 * console.log(tail.text()); // "cdef"
 * ```
 */
export class OutputTail {
  #chunks: Uint8Array[] = [];
  #size = 0;
  #limit: number;

  /**
   * Creates an empty tail.
   *
   * @param limit Bytes kept; defaults to {@linkcode SANDBOX_DENIED_WINDOW_BYTES}.
   */
  constructor(limit: number = SANDBOX_DENIED_WINDOW_BYTES) {
    this.#limit = limit;
  }

  /**
   * Appends output.
   *
   * @param bytes A chunk of output.
   */
  push(bytes: Uint8Array): void {
    if (bytes.length === 0) return;
    this.#chunks.push(bytes.slice());
    this.#size += bytes.length;
    while (this.#chunks.length > 1 && this.#size - this.#chunks[0]!.length >= this.#limit) {
      this.#size -= this.#chunks.shift()!.length;
    }
  }

  /** The kept bytes (at most the limit), decoded as UTF-8. */
  text(): string {
    const all = new Uint8Array(this.#size);
    let offset = 0;
    for (const chunk of this.#chunks) {
      all.set(chunk, offset);
      offset += chunk.length;
    }
    return new TextDecoder().decode(all.subarray(Math.max(0, all.length - this.#limit)));
  }
}

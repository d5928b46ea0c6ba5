/**
 * Launching a sandboxed command: the command line that runs it under
 * bubblewrap with its seccomp filter, and the clean-up once it exited.
 *
 * @module
 */

import { ErrorCode, invalidParams, RpcError } from "../../protocol/errors.ts";
import { type SandboxAvailability, sandboxAvailable } from "./availability.ts";
import { bwrapArgs, SECCOMP_SHIM, SHIM_SHELL } from "./bubblewrap.ts";
import {
  acquireSyntheticMountPoints,
  releaseSyntheticMountPoints,
  type SandboxPlan,
} from "./policy.ts";
import { holdCoverDirectories } from "./mount_locks.ts";
import { trackNetworkSandbox } from "./peer.ts";
import { filterDirectory, filterFile } from "./seccomp_files.ts";

/** Options for {@linkcode launchSandboxed}. */
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
  const directory = filterDirectory();
  const args = bwrapArgs(plan, argv, {
    ...options,
    filterDirectory: directory,
    deniedFile: directory === undefined ? undefined : `${directory}/denied`,
  });
  // Before bubblewrap creates a mount point: no other server removes one next to it meanwhile.
  const unhold = plan.isolation === "filesystem"
    ? holdCoverDirectories(
      plan.mounts.filter((mount) => mount.access !== "write").map((mount) => mount.path),
    )
    : () => {};
  acquireSyntheticMountPoints(synthetic);
  // A sandbox with network reaches the server's port: the listener checks such peers.
  const untrack = plan.network === "enabled" ? trackNetworkSandbox() : () => {};
  let released = false;
  return {
    wrapped: true,
    argv: [SHIM_SHELL, "-c", SECCOMP_SHIM, filter, availability.bwrap, ...args],
    release() {
      if (released) return;
      released = true;
      untrack();
      unhold();
      releaseSyntheticMountPoints(synthetic);
    },
  };
}

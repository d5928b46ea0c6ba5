/**
 * `--process-namespace`: every process that no sandbox wraps runs in its
 * own PID namespace under bubblewrap (`--unshare-pid --die-with-parent`,
 * the host's file system and network unchanged), so the kernel ends all of
 * its descendants when it ends, and when the server dies, even by SIGKILL
 * (bubblewrap's parent-death signal). The price: a background job ends
 * with its leader (the namespace goes when the leader exits), where the
 * reference lets it run on; and about 5 ms per spawn.
 *
 * @module
 */

import { ErrorCode, invalidParams, RpcError } from "../../protocol/errors.ts";
import { type SandboxAvailability, sandboxAvailable } from "./availability.ts";

let enabled = false;

/**
 * Turns the mode on or off for this server process (`--process-namespace`).
 *
 * @param on Whether unsandboxed processes get their own PID namespace.
 */
export function setProcessNamespaces(on: boolean): void {
  enabled = on;
}

/** Whether `--process-namespace` is on. */
export function processNamespaces(): boolean {
  return enabled;
}

/**
 * The command line that runs `argv` in its own PID namespace.
 *
 * @param program The resolved, permission-checked executable (`argv[0]` looked up).
 * @param argv The requested command.
 * @param arg0 What the command sees as `argv[0]`, if the client chose it.
 * @param availability Whether bubblewrap works (default: the cached probe).
 * @throws {RpcError} `-32603` `spawnFailed` when bubblewrap cannot run, `-32602` for an
 * `arg0` this bubblewrap cannot set.
 */
export function inPidNamespace(
  program: string,
  argv: readonly string[],
  arg0: string | null | undefined,
  availability: SandboxAvailability = sandboxAvailable(),
): string[] {
  if (!availability.ok || availability.layer === "landlock") {
    const reason = availability.ok
      ? "it needs bubblewrap, and the sandbox layer here is landlock (no user namespaces)"
      : availability.reason;
    throw new RpcError(
      ErrorCode.InternalError,
      `cannot start a process in its own PID namespace (--process-namespace): ${reason}`,
      { data: { kind: "spawnFailed" } },
    );
  }
  const customArg0 = arg0 !== undefined && arg0 !== null && arg0 !== argv[0];
  if (customArg0 && !availability.argv0) {
    throw invalidParams(
      `arg0 needs bubblewrap 0.9 or later with --process-namespace (this is ${availability.version})`,
    );
  }
  const args = [availability.bwrap, "--die-with-parent", "--unshare-pid", "--dev-bind", "/", "/"];
  if (customArg0) args.push("--argv0", arg0);
  return [...args, "--", program, ...argv.slice(1)];
}
